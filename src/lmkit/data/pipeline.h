// The objective registry: every pretraining objective by name, with how its
// dataset is made, what its tokenizer must have and the synthetic batch the
// benchmarks train on. The apps, lmkit-tokenize inspect and the benchmarks ask it;
// which model families train an objective is theirs to say (models::Family).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/batch.h"
#include "lmkit/data/images.h"
#include "lmkit/data/objectives.h"

namespace lmkit::data {

/// What an objective's dataset is made from.
struct ObjectiveInputs {
  std::shared_ptr<const Corpus> corpus;     ///< token corpus (corpus objectives)
  std::string source_file, target_file;     ///< line-aligned text (parallel-text objectives)
  const tokenizer::Tokenizer* tokenizer = nullptr;
  int64_t seq_len = 128;                    ///< sequence (input) length
  uint64_t seed = 0;                        ///< masking / pairing seed
  MaskingOptions masking;                   ///< masked-LM objectives
  PackingOptions packing;                   ///< objectives that pack documents (ObjectiveSpec::packs_documents)
  std::shared_ptr<const ImageSet> images;   ///< image objectives (ObjectiveSpec::images); seq_len is then the patches
  ImageProcessor processor;                 ///< how their pixels are normalised
};

struct ObjectiveSpec {
  std::string name;                ///< as --objective spells it
  std::string summary;             ///< one line for --help and errors
  bool parallel_text = false;      ///< reads PREFIX.SRC / PREFIX.TGT line by line, not a corpus
  bool images = false;             ///< reads IDX image files (ObjectiveInputs::images), no text and no tokenizer
  bool separate_targets = false;   ///< labels are a sequence of their own (a decoder's), not per input position
  /// Packs documents into blocks and honours ObjectiveInputs::packing (--document-mask,
  /// --reset-positions); an objective without it is refused those flags.
  bool packs_documents = false;
  /// Special tokens the tokenizer must have, as SpecialTokens names them: mask, cls, sep, eos, sentinels.
  std::vector<std::string> needs;
  /// What the labels are. 0: token ids (a language model: the run's summary reports perplexity,
  /// `lmkit-tokenize inspect` shows them as pieces); N: classes 0..N-1 per token for a token
  /// classifier (lmkit-pretrain builds it with num_labels N, its summary reports the accuracy
  /// of the labelled positions, inspect shows the classes as numbers).
  int64_t num_classes = 0;
  std::function<std::shared_ptr<Dataset>(const ObjectiveInputs&)> make_dataset;
  /// Decoder positions a benchmark feeds for `seq_len` inputs (separate_targets only).
  std::function<int64_t(int64_t seq_len)> target_length;
  /// A random batch shaped as the objective's (B × seq_len inputs, ids in [5, vocab)).
  std::function<Batch(int64_t batch, int64_t seq_len, int64_t target_len, int64_t vocab)> synthetic_batch;
  std::string source;  ///< who registered it: "lmkit", or a plugin's path (register_objective sets it)

  /// make_dataset(inputs), its failures and an empty result named by the plugin (call_registered).
  std::shared_ptr<Dataset> dataset(const ObjectiveInputs& inputs) const;
  /// synthetic_batch(...) for lmkit-bench; an InputError naming the plugin when it has none.
  Batch synthetic(int64_t batch, int64_t seq_len, int64_t target_len, int64_t vocab) const;
};

/// Every objective, lmkit's then those registered, in the order --help lists them.
const std::vector<ObjectiveSpec>& objectives();
/// Adds an objective (from a program or a plugin: docs/library.md). Its name must be
/// new: InputError naming both registrants otherwise. A family pretrains with it once
/// the family lists it (models::add_family_objective).
void register_objective(ObjectiveSpec spec);
/// "mlm, mlm+nsp, ... or NAME": the registered objectives' names, for help texts;
/// `corpus_only` leaves out those that read parallel text.
std::string objective_names(bool corpus_only = false);
/// The objective `name`; InputError listing them otherwise.
const ObjectiveSpec& objective(const std::string& name);
/// InputError unless `tokenizer` has every special token `spec` needs.
void check_objective_tokenizer(const ObjectiveSpec& spec, const tokenizer::Tokenizer& tokenizer);

/// InputError unless `spec` packs documents where `packing` asks for the mask or restarted positions.
void check_objective_packing(const ObjectiveSpec& spec, const PackingOptions& packing);

/// The padding id for a tokenizer's family (GPT-2 has none: its EOS, masked out).
int32_t pad_id(const tokenizer::Tokenizer& tokenizer);

}  // namespace lmkit::data
