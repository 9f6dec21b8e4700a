// A token corpus on disk: text encoded once, read memory-mapped.
//
//   CORPUS/header.json     {"format": "lmkit-corpus-1", "dtype": "uint16"|"uint32", "vocab_size",
//                           "tokenizer_checksum", "tokenizer_family", "tokens", "sentences", "documents", "sources"}
//   CORPUS/tokens.bin      every token id, flat (uint16 when the vocabulary fits, else uint32)
//   CORPUS/sentences.bin   uint64 token offset of each sentence start, plus the end (sentences + 1)
//   CORPUS/documents.bin   uint64 sentence index of each document start, plus the end (documents + 1)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/data/text.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit {
class ProgressBar;
}

namespace lmkit::data {

struct EncodeOptions {
  std::vector<std::string> inputs;
  TextFormat format = TextFormat::kAuto;
  std::string text_field = "text";
  std::string output;  ///< the corpus directory
  int threads = 0;     ///< 0: every core; the output does not depend on it
  /// Text encoded at a time (memory holds about this much text and its tokens); the output
  /// does not depend on it.
  size_t batch_bytes = size_t{32} << 20;
};

/// Encodes text files into a corpus directory (written atomically) and returns its header,
/// streaming: memory holds one batch of about 32 MiB of text and its tokens (and a Parquet
/// row group), not the corpus. With `progress_label`, a bar of the inputs' bytes read (rate,
/// ETA). An input with no text is an InputError.
Json encode_corpus(const tokenizer::Tokenizer& tokenizer, const EncodeOptions& options,
                   const std::string& progress_label = "");

/// A memory-mapped corpus.
class Corpus {
 public:
  /// Opens a corpus directory; a missing or damaged one is an InputError naming it.
  /// `source` names the corpus in messages when it is a cache of a text file the user gave.
  explicit Corpus(const std::string& dir, std::string source = "");

  int64_t num_tokens() const { return num_tokens_; }
  int64_t num_sentences() const { return num_sentences_; }
  int64_t num_documents() const { return num_documents_; }
  int64_t vocab_size() const { return vocab_size_; }
  const Json& header() const { return header_; }
  const std::string& path() const { return dir_; }
  /// What the user gave: the text file a cached corpus was encoded from, else the directory.
  const std::string& name() const { return source_.empty() ? dir_ : source_; }

  /// Appends tokens [begin, end) to `out`.
  void append_tokens(int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  int64_t sentence_begin(int64_t s) const { return sentences_[s]; }
  int64_t sentence_end(int64_t s) const { return sentences_[s + 1]; }
  int64_t document_first_sentence(int64_t d) const { return documents_[d]; }
  int64_t document_end_sentence(int64_t d) const { return documents_[d + 1]; }
  int64_t document_begin_token(int64_t d) const { return sentences_[documents_[d]]; }
  int64_t document_end_token(int64_t d) const { return sentences_[documents_[d + 1]]; }

  /// Throws InputError unless the corpus was encoded with this tokenizer.
  void check_tokenizer(const tokenizer::Tokenizer& tokenizer) const;
  /// Throws InputError unless every id fits a model vocabulary of `vocab_size`.
  void check_vocab(int64_t vocab_size, const std::string& model) const;

 private:
  std::string dir_, source_;
  Json header_;
  /// Throws InputError unless `index` (entries + 1 offsets) starts at 0, never decreases and ends at `total`.
  void check_index(const uint64_t* index, int64_t entries, uint64_t total, const char* name, const char* unit) const;
  MappedFile tokens_file_, sentences_file_, documents_file_;
  const uint16_t* tokens16_ = nullptr;
  const uint32_t* tokens32_ = nullptr;
  const uint64_t* sentences_ = nullptr;
  const uint64_t* documents_ = nullptr;
  bool wide_ = false;
  int64_t num_tokens_ = 0, num_sentences_ = 0, num_documents_ = 0, vocab_size_ = 0;
};

/// Whether `path` is a corpus directory (has header.json).
bool is_corpus(const std::string& path);

/// The text files `path` names: itself, a directory's files (shards; not its subdirectories),
/// or a pattern's matches ('shards/*.jsonl.zst'), sorted. InputError unless each is a file to
/// read: a missing path, a pattern that matches nothing, a model checkpoint directory, a FIFO
/// or a device, and an unreadable file are each named. A corpus directory is not text.
std::vector<std::string> text_files(const std::string& path);

/// text_files(path), for its checks alone.
void check_text_file(const std::string& path);

/// `path` as a corpus: a corpus directory as it is (checked against `tokenizer`), or
/// its text files (text_files) encoded once into CACHE_DIR/NAME-KEY, where KEY hashes each
/// file's path, size and time and the tokenizer: an edited, added or removed file or another
/// tokenizer encodes anew, a second run on the same text reuses the corpus. `text_field`: the
/// JSONL field or Parquet column of the texts (another than "text" is part of KEY too).
std::shared_ptr<const Corpus> open_corpus(const std::string& path, const tokenizer::Tokenizer& tokenizer,
                                          const std::string& cache_dir, const std::string& name,
                                          const std::string& text_field = "text");

}  // namespace lmkit::data
