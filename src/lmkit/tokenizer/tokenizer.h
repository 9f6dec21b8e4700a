// SentencePiece tokenizers with each model family's special tokens.
//
// sentencepiece itself lives in a separate module (src/spm, liblmkit_spm.so)
// loaded at run time, because it cannot share an executable with LibTorch
// (DESIGN.md). The module is found next to the running executable, then in
// ../lib, or at $LMKIT_SPM_MODULE.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::tokenizer {

enum class Family {
  kBert,  ///< [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4
  kGpt2,  ///< <unk>=0 <|endoftext|>=1
  kT5,    ///< <pad>=0 </s>=1 <unk>=2, and <extra_id_0..99> at the top of the vocabulary
};
Family parse_family(const std::string& name);  ///< bert, gpt2, t5 (InputError otherwise)
std::string family_name(Family family);

/// Special token ids; -1 where the family has none.
struct SpecialTokens {
  int32_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1, eos = -1;
  int32_t num_sentinels = 0;  ///< T5: 100 sentinels <extra_id_i> = vocab_size - 1 - i
};

struct TrainOptions {
  std::vector<std::string> inputs;  ///< text files, one sentence or paragraph per line
  int64_t vocab_size = 8000;        ///< including special tokens (and T5's 100 sentinels)
  Family family = Family::kBert;
  std::string model_type = "unigram";  ///< unigram or bpe
  double character_coverage = 0.9995;
  bool byte_fallback = true;           ///< unknown characters become UTF-8 bytes, never [UNK]
  int64_t max_sentences = 2000000;     ///< lines sampled for training
  int threads = 0;                     ///< 0: every core
  std::string output;                  ///< PATH.model; tokenizer_config.json is written beside it
};

class Tokenizer {
 public:
  /// Trains a model, writes OUTPUT.model and tokenizer_config.json beside it, and returns it.
  static Tokenizer train(const TrainOptions& options);
  /// Loads a SentencePiece model (lmkit's, or another one such as T5's spiece.model).
  /// The family comes from `family`, else from tokenizer_config.json beside the
  /// model, else from the special pieces the model holds.
  static Tokenizer load(const std::string& model_path, std::optional<Family> family = std::nullopt);

  /// Token ids of `text`, no special tokens added.
  std::vector<int32_t> encode(std::string_view text) const;
  /// Text of `ids`; sentinels print as <extra_id_N>, other special tokens are dropped
  /// unless `keep_special`.
  std::string decode(const std::vector<int32_t>& ids, bool keep_special = false) const;
  /// The piece of an id ("▁the", "[MASK]", "<extra_id_3>").
  std::string piece(int32_t id) const;

  int64_t vocab_size() const { return vocab_size_; }
  Family family() const { return family_; }
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
  /// 64-bit FNV-1a of the model file: a corpus records it, and a model refuses other tokenizers' corpora.
  uint64_t checksum() const { return checksum_; }
  /// Writes tokenizer.model and tokenizer_config.json into `dir`.
  void save(const std::string& dir) const;
  Json config_json() const;

 private:
  std::shared_ptr<void> handle_;
  std::string model_bytes_;
  Family family_ = Family::kBert;
  SpecialTokens specials_;
  int64_t piece_size_ = 0, vocab_size_ = 0;
  uint64_t checksum_ = 0;
  std::vector<uint8_t> kind_;        // 0 regular, 1 special
  std::vector<uint8_t> word_start_;  // 1 if the piece starts a word
  std::vector<int32_t> regular_;
};

/// FNV-1a 64-bit hash.
uint64_t fnv1a64(std::string_view bytes);

}  // namespace lmkit::tokenizer
