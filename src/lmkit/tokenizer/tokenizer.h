// Tokenizers with each model family's special tokens: SentencePiece models that
// lmkit trains (or T5's spiece.model), and HuggingFace tokenizer directories
// (WordPiece, byte-level BPE, Unigram). Whatever lmkit writes, HuggingFace loads
// (tokenizer.json, tokenizer_config.json, special_tokens_map.json), and the ids
// agree with HF's: special tokens written in the text are those tokens, and
// encode_pair() applies the tokenizer's own template ([CLS] A [SEP] B [SEP], A </s>).
//
// sentencepiece itself lives in a separate module (src/spm, liblmkit_spm.so)
// loaded at run time, because it cannot share an executable with LibTorch
// (docs/architecture.md). The module is found at $LMKIT_SPM_MODULE, else beside
// liblmkit.so (build/lib, or an installed prefix's lib), next to the running
// executable, or in its ../lib.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::tokenizer {

class Backend;

struct FamilySpec;

/// A tokenizer family by name: an entry of the family table (families.h): bert
/// ([PAD] [UNK] [CLS] [SEP] [MASK], lmkit's 0..4), gpt2 (`<|endoftext|>`), t5 (`<pad>=0`
/// `</s>=1` `<unk>=2` and <extra_id_0..99> at the top of the vocabulary), ...
using Family = std::string;
/// The canonical name of a family or alias ("gpt" -> "gpt2"); InputError listing them otherwise.
Family parse_family(const std::string& name);

/// Special token ids; -1 where the family has none.
struct SpecialTokens {
  int32_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1, eos = -1;
  int32_t bos = -1;  ///< the BOS piece (bos_token), read only by families that name it among their specials (Llama)
  int32_t num_sentinels = 0;  ///< T5: 100 sentinels `<extra_id_i>` = vocab_size - 1 - i
  /// The id HF's key names ("pad_token" -> pad, ...; "" -> -1); nullptr/-1 for other keys.
  int32_t* slot(const std::string& key);
  int32_t id(const std::string& key) const;
};

/// A token HuggingFace's added vocabulary holds: matched in the raw text before the model runs.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = true, lstrip = false, rstrip = false, single_word = false;
};

/// What encode_pair() puts around the texts: special ids and the sequences, with token types.
struct Template {
  struct Item {
    int32_t id = -1;  ///< a special token, or -1 for a sequence
    int sequence = 0;  ///< 0: A, 1: B (when id < 0)
    int type_id = 0;
  };
  std::vector<Item> single, pair;
  int64_t added(bool is_pair) const;  ///< special tokens it adds
};

struct TrainOptions {
  /// Plain text files, one sentence or paragraph per line, which SentencePiece's trainer reads
  /// itself (JSONL as JSON, compressed files as bytes): data::train_tokenizer takes corpora as
  /// shipped (JSONL, gzip, zstd, Parquet, directories, patterns) and hands it their sentences.
  std::vector<std::string> inputs;
  /// TrainOptions::threads' default: 2, the reference machine's cores, where every tokenizer in
  /// lmkit's tests and documented results was trained.
  static constexpr int kTrainingThreads = 2;
  int64_t vocab_size = 8000;        ///< including special tokens (and T5's 100 sentinels)
  Family family = "bert";
  std::string model_type = "unigram";  ///< unigram or bpe
  double character_coverage = 0.9995;
  bool byte_fallback = true;           ///< unknown characters become UTF-8 bytes, never [UNK]
  int64_t max_sentences = 2000000;     ///< lines sampled for training
  /// SentencePiece's threads. Its trainer sums each thread's share of the expected counts, so the
  /// pieces' scores, and with them their order (the ids), depend on the count: 0 is
  /// kTrainingThreads on every machine, never its cores or OMP_NUM_THREADS (torchrun's 1 a rank).
  int threads = 0;
  /// A directory (it becomes a tokenizer directory, as save() writes one), or
  /// PATH.model: PATH.model, PATH.lmkit.json and PATH.tokenizer.json, plus
  /// HuggingFace's directory files for the folder (the last trained tokenizer's).
  std::string output;
};

/// Ids with their token types (segment A 0, B 1 for BERT).
struct Encoding {
  std::vector<int32_t> ids, type_ids;
};

/// What a reader of tokenizer files (hf.h) hands to Tokenizer::assemble(): the
/// algorithm and what the files say about special tokens, template and decoding.
struct TokenizerParts {
  std::shared_ptr<const Backend> backend;
  std::string model_bytes;  ///< SentencePiece: the .model file ("" otherwise)
  /// HuggingFace: the files it came from, verbatim (save() writes them back).
  std::vector<std::pair<std::string, std::string>> hf_files;
  std::string source;  ///< the files it was read from, for messages
  uint64_t checksum = 0;
  std::vector<AddedToken> added;  ///< HF's added vocabulary; empty: the family's specials
  std::optional<Template> post_processor;  ///< the files' template; none: the family's
  bool clean_up_spaces = false;  ///< transformers' clean_up_tokenization_spaces
  bool metaspace_decoder = false;  ///< HF's Metaspace decoder (T5's tokenizer.json) instead of SentencePiece's
  /// HF's Metaspace pre-tokenizer in front of a SentencePiece backend without a dummy
  /// prefix (Llama's tokenizer.json): a space goes before a segment that does not start
  /// with one, every segment (kAlways) or the text's first (kFirst, HF's "first").
  enum class Prepend { kNone, kAlways, kFirst } metaspace_prepend = Prepend::kNone;
  bool strip_leading_space = false;  ///< HF's Strip decoder (start 1): one leading space off the decoded text
  /// HF's names of the special tokens (cls_token: "[CLS]", ...) and the keys
  /// tokenizer_class, lmkit_family, extra_ids.
  Json special_names = Json::object();
};

class Tokenizer {
 public:
  /// Trains a SentencePiece model and writes it where TrainOptions::output says.
  static Tokenizer train(const TrainOptions& options);
  /// Loads a tokenizer from
  /// - a directory: lmkit's (tokenizer.model + tokenizer.lmkit.json) or HuggingFace's
  ///   (tokenizer.json; vocab.txt; vocab.json + merges.txt; spiece.model or tokenizer.model),
  /// - PATH.model (SentencePiece; PATH.lmkit.json beside it names the family),
  /// - a HuggingFace tokenizer.json file.
  /// The family comes from `family`, else from the files, else from the special pieces.
  static Tokenizer load(const std::string& path, std::optional<Family> family = std::nullopt);
  /// Whether `dir` holds a tokenizer load() would find.
  static bool present(const std::string& dir);
  /// A tokenizer from what a reader found: the family (given, else named in the files,
  /// else told by a special piece), its special ids, sentinels, added tokens and template.
  /// `what` names the files in errors.
  static Tokenizer assemble(TokenizerParts parts, std::optional<Family> family, const std::string& what);

  /// Token ids of `text`, no special tokens added (special tokens written in it are those tokens).
  std::vector<int32_t> encode(std::string_view text) const;
  /// The ids the model sees for a text or a text pair: encode() of each, in the tokenizer's template.
  Encoding encode_pair(std::string_view a, std::optional<std::string_view> b = std::nullopt) const;
  /// `a` (and `b`) in the template; the caller has already truncated them.
  Encoding apply_template(const std::vector<int32_t>& a, const std::vector<int32_t>* b = nullptr) const;
  const Template& post_processor() const { return template_; }
  /// Text of `ids`; sentinels print as `<extra_id_N>`, other special tokens (and [UNK]) are
  /// dropped unless `keep_special`.
  std::string decode(const std::vector<int32_t>& ids, bool keep_special = false) const;
  /// The piece of an id ("▁the", "##ing", "Ġthe", "[MASK]", "`<extra_id_3>`").
  std::string piece(int32_t id) const;

  int64_t vocab_size() const { return vocab_size_; }
  /// Whether it is the empty tokenizer, Tokenizer{}: what a task of an image model gets in place
  /// of one (vocab_size 0, no special ids; encoding or decoding through it is a RuntimeError).
  bool empty() const { return parts_.backend == nullptr; }
  const Family& family() const { return family_; }
  /// The family's entry in the tokenizer family table.
  const FamilySpec& family_spec() const;
  /// "sentencepiece-unigram", "sentencepiece-bpe", "wordpiece" or "byte-level-bpe".
  std::string format() const;
  /// The files it was loaded from.
  const std::string& source() const { return parts_.source; }
  const SpecialTokens& specials() const { return specials_; }
  /// Control tokens, padding and sentinels: never masked, never a random replacement.
  bool is_special(int32_t id) const { return id < 0 || id >= vocab_size_ || kind_[static_cast<size_t>(id)] == 1; }
  /// Whether the piece starts a whitespace-separated word (for whole-word masking).
  bool starts_word(int32_t id) const { return word_start_[static_cast<size_t>(id)] != 0; }
  /// Every non-special id, ascending: what a random MLM replacement is drawn from.
  const std::vector<int32_t>& regular_ids() const { return regular_; }
  /// Every special id, ascending.
  std::vector<int32_t> special_ids() const;
  /// T5 sentinel i (0-based): vocab_size - 1 - i.
  int32_t sentinel(int32_t i) const;
  /// 64-bit FNV-1a of the model files: a corpus records it, and a model refuses other tokenizers' corpora.
  uint64_t checksum() const { return parts_.checksum; }
  /// The added vocabulary: the files' own, or the special pieces HF would register; longest first.
  const std::vector<AddedToken>& added_tokens() const { return parts_.added; }
  /// The SentencePiece .model bytes ("" for WordPiece and byte-level BPE).
  const std::string& sentencepiece_model() const { return parts_.model_bytes; }
  /// Writes the tokenizer into `dir` so that lmkit and HuggingFace's AutoTokenizer both load it.
  void save(const std::string& dir) const;
  /// lmkit's description of it (what PATH.lmkit.json holds).
  Json config_json() const;

 private:
  /// One segment between added tokens through the backend (with HF's Metaspace prefix, TokenizerParts).
  void encode_segment(std::string_view text, bool first, std::vector<int32_t>& ids) const;
  Family resolve_family(std::optional<Family> family, const std::string& what) const;
  void resolve_specials(const FamilySpec& spec, const std::string& what);
  void resolve_sentinels(const FamilySpec& spec, const std::string& what);
  void register_added_tokens();
  void classify_ids();
  const Backend& backend() const;
  int32_t id_of(const std::string& piece) const;
  void write_sentencepiece(const std::string& model_path, const std::string& hf_dir) const;

  TokenizerParts parts_;
  std::vector<bool> added_first_byte_;  // 256 flags: a byte some added token starts with
  Template template_;
  Family family_ = "bert";
  SpecialTokens specials_;
  int64_t vocab_size_ = 0;
  std::vector<uint8_t> kind_;        // 0 regular, 1 special
  std::vector<uint8_t> word_start_;  // 1 if the piece starts a word
  std::vector<int32_t> regular_;
};

/// FNV-1a 64-bit hash.
uint64_t fnv1a64(std::string_view bytes);

}  // namespace lmkit::tokenizer
