// What the Tokenizer facade asks of a tokenization model: text (with no special
// tokens in it) to ids and back, and the pieces behind the ids. One backend per
// algorithm: SentencePiece (through lmkit's module), WordPiece (BERT) and
// byte-level BPE (GPT-2); the facade adds the special tokens, the post-processing
// template and the files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmkit::tokenizer {

class Backend {
 public:
  virtual ~Backend() = default;
  /// "sentencepiece-unigram", "sentencepiece-bpe", "wordpiece" or "byte-level-bpe".
  virtual std::string format() const = 0;
  /// Ids are 0 .. size() - 1 (a HuggingFace vocabulary may leave holes: their piece is "").
  virtual int64_t size() const = 0;
  virtual std::string piece(int32_t id) const = 0;
  /// The id of a piece, -1 if the vocabulary lacks it.
  virtual int32_t id_of(std::string_view piece) const = 0;
  /// SentencePiece control pieces: never produced by encoding.
  virtual bool is_control(int32_t id) const { return false; }
  /// Whether the piece starts a word (whole-word masking).
  virtual bool starts_word(int32_t id) const = 0;
  /// Appends the ids of `text` to `out`.
  virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
  /// The text of ids that are all ordinary pieces.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
};

// ---- SentencePiece (sentencepiece.cpp) --------------------------------------

/// A SentencePiece model's contents (the fields of sentencepiece_model.proto lmkit uses).
struct SpmModel {
  enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  struct Piece {
    std::string piece;
    float score = 0;
    int type = kNormal;
  };
  std::vector<Piece> pieces;
  int model_type = 1;  ///< 1 unigram, 2 bpe, 3 word, 4 char
  bool byte_fallback = false;
  std::string normalizer_name;
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  bool treat_whitespace_as_suffix = false;
};
/// Parses a serialized ModelProto; InputError naming `what` if it is not one.
SpmModel parse_spm_model(std::string_view bytes, const std::string& what);
std::string serialize_spm_model(const SpmModel& model);

std::shared_ptr<const Backend> load_sentencepiece(const std::string& bytes, const std::string& what);
/// Trains with sentencepiece_trainer's key/value options (model_prefix among them): InputError
/// with its message on failure, RuntimeError naming `model_path` (what the user asked for) when
/// PREFIX.model or PREFIX.vocab could not be written (a full disk, a file-size limit).
void train_sentencepiece(const std::vector<std::pair<std::string, std::string>>& options, const std::string& model_path);

// ---- WordPiece (wordpiece.cpp) ----------------------------------------------

/// HuggingFace's BertNormalizer + BertPreTokenizer + WordPiece model + WordPiece decoder.
struct WordPieceOptions {
  bool normalize = true;  ///< whether the BertNormalizer runs at all
  bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;
  std::string unk_token = "[UNK]";
  std::string prefix = "##";
  int64_t max_input_chars_per_word = 100;
  bool decoder_cleanup = true;
};
std::shared_ptr<const Backend> make_wordpiece(std::vector<std::string> vocab, const WordPieceOptions& options);

// ---- byte-level BPE (bpe.cpp) -----------------------------------------------

/// GPT-2's pre-tokenization: contractions, letters, numbers, other symbols, white space.
extern const char* const kGpt2SplitPattern;

/// HuggingFace's ByteLevel pre-tokenizer (or a Split regex before it) + BPE model + ByteLevel decoder.
struct BpeOptions {
  std::string split_pattern = kGpt2SplitPattern;  ///< PCRE2, UTF + Unicode properties
  bool add_prefix_space = false;
  bool ignore_merges = false;  ///< a word already in the vocabulary is one token
  std::string unk_token;       ///< "" : characters outside the vocabulary are dropped, as HF does
};
std::shared_ptr<const Backend> make_byte_level_bpe(std::vector<std::string> vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   const BpeOptions& options);

}  // namespace lmkit::tokenizer
