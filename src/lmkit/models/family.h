// What lmkit knows of each model family, in one place: the apps, the trainer,
// the registry and the benchmarks ask the family instead of comparing model_type
// strings. Adding a family is its own files (config, model, a `*_family()`
// describing it) and one line in families() (family.cpp); docs/architecture.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/batch.h"
#include "lmkit/core/config.h"

namespace lmkit::models {

class Model;

/// A pretraining objective of a family and the architecture it trains.
struct Objective {
  std::string name;          ///< as --objective spells it: mlm+nsp, mlm, clm, span, seq2seq
  std::string architecture;  ///< the HF class it trains, e.g. "BertForPreTraining"
};

/// The heads a finetuning task asks a family for (tasks::TaskSpec::head); a family maps
/// each it has to one of its architectures in Family::heads. A task of a plugin may name
/// a head of its own, which the families that have it list too.
inline constexpr const char* kClassificationHead = "classification";            ///< a label per sequence
inline constexpr const char* kTokenClassificationHead = "token-classification";  ///< a label per token
inline constexpr const char* kTextToTextHead = "text-to-text";                   ///< generates a target text
inline constexpr const char* kQuestionAnsweringHead = "question-answering";      ///< an answer span's start and end
inline constexpr const char* kImageClassificationHead = "image-classification";  ///< a label per image

struct Family {
  std::string model_type;                  ///< HF model_type: bert, gpt2, t5, transformer
  std::string summary;                     ///< one line for `lmkit-info --registered`: what it is, after whom
  std::vector<std::string> architectures;  ///< HF classes it builds; the first is the default
  std::vector<Objective> objectives;       ///< pretraining objectives; the first is the default
  /// Finetuning head -> the architecture that has it: kClassificationHead, kTokenClassificationHead,
  /// kTextToTextHead (the one it finetunes text-to-text with), a plugin's own.
  std::map<std::string, std::string> heads;
  std::string tokenizer_family;            ///< the tokenizer it trains and expects: bert, gpt2, t5
  std::string positions_key;               ///< config key bounding the sequence length ("": relative positions)
  /// Where the positions have no end (rotary): the config key of the length the model is
  /// meant for, lmkit-evaluate's default perplexity window ("": give --context).
  std::string context_key;
  /// The longest input for a config when it is not config[positions_key] (RoBERTa: less padding_idx + 1).
  std::function<int64_t(const Json& config)> max_length_of;
  std::vector<std::string> metrics;        ///< lmkit-evaluate metrics for its pretrained checkpoints
  bool encoder_decoder = false;            ///< inputs go to an encoder, labels to a decoder
  bool images = false;                     ///< reads pixel_values, not text: its checkpoints carry no tokenizer
  /// Its config as another family's whose heads finetune its checkpoints (vit_mae -> vit, as HF's
  /// ViTForImageClassification.from_pretrained reads an MAE checkpoint); nullptr: none.
  std::function<Json(const Json& config)> finetunes_as;
  /// Builds the model `config` describes with the head `architecture` (one of architectures).
  std::function<std::shared_ptr<Model>(const Json& config, const std::string& file, const std::string& architecture)>
      create;
  /// Fits a preset's config to a tokenizer trained for it (vocabulary size, special ids).
  std::function<void(Json& config, int64_t vocab_size, int32_t pad_id, int32_t eos_id)> adopt_vocabulary;
  std::string source;  ///< who registered it: "lmkit", or a plugin's path (register_family sets it)

  /// The objective called `name` ("" for the default); InputError naming those that apply.
  const Objective& objective(const std::string& name) const;
  /// The longest input a model of `config` takes (0: no limit): max_length_of, else config[positions_key].
  int64_t max_length(const Json& config) const;
  /// Fits `config` to a tokenizer through adopt_vocabulary; an InputError naming the plugin when
  /// the family has none, its failures named by call_registered.
  void fit_vocabulary(Json& config, int64_t vocab_size, int32_t pad_id, int32_t eos_id) const;
  /// Whether `architecture` is one this family builds.
  bool builds(const std::string& architecture) const;
  /// The architecture with finetuning head `head`, "" for none.
  std::string head(const std::string& head) const;
  /// The architecture with finetuning head `head`; InputError naming the families that have one.
  const std::string& head_or_error(const std::string& head) const;
};

/// Every family, lmkit's then those registered, in the order errors list them.
const std::vector<Family>& families();
/// Adds a family (from a program or a plugin: docs/library.md). Its model_type must be
/// new: InputError naming both registrants otherwise. Register before any model is built
/// (a plugin registers as it loads): references to families stay valid only until then.
void register_family(Family family);
/// Lets `model_type` pretrain with `objective` (a registered data objective) as the
/// architecture it names, one the family builds; InputError when the family already has it.
void add_family_objective(const std::string& model_type, Objective objective);
/// The family of `model_type`; InputError listing the known ones.
const Family& family(const std::string& model_type);
/// The families that pretrain with `objective`, in families() order (empty: none).
std::vector<const Family*> families_with(const std::string& objective);
/// "bert, gpt2, t5 or transformer".
std::string family_names();

/// Number of positions that carry a loss in a batch (labels other than -100, the
/// first position dropped where the model shifts labels; one per row for
/// classification); 0 for an empty batch.
int64_t count_targets(const Model& model, const Batch& batch);

}  // namespace lmkit::models
