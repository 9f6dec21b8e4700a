// Token classification data (NER, POS tagging): sentences of words with one tag
// each, read from CoNLL columns or JSONL, split into the checkpoint tokenizer's
// subwords with the tag on each word's first subword (HF run_ner's alignment).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lmkit/data/dataset.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

/// One sentence: its words, their tags, and the line it starts at.
struct TaggedSentence {
  std::vector<std::string> words, tags;
  int64_t line = 0;                 ///< where it starts (JSONL: its line)
  std::vector<int64_t> word_lines;  ///< CoNLL: each word's line (empty for JSONL)
  /// The line of word `w`, for messages.
  int64_t line_of(size_t w) const { return w < word_lines.size() ? word_lines[w] : line; }
};

/// Where the words and tags are.
struct TaggedFormat {
  std::string format = "auto";  ///< auto (data/rows.h json_rows: jsonl, else conll), conll, jsonl
  int64_t tag_column = -1;      ///< CoNLL: the tag's 0-based column; -1: the last
  std::string tokens_field = "tokens", tags_field = "tags";  ///< JSONL keys
  /// JSONL tags given as integers (HF datasets' ClassLabel ids) are these names, in id
  /// order; without names an integer tag is an InputError naming --label-names.
  std::vector<std::string> label_names;
};

/// Applies a --label-column value: digits name the CoNLL tag column (1 or more;
/// InputError for 0, the word), anything else the JSONL tags field.
void set_tag_source(TaggedFormat& format, const std::string& label_column);

/// Reads sentences: CoNLL (one word per line, whitespace-separated columns, the word
/// first; blank lines between sentences; -DOCSTART- lines skipped) or JSONL
/// ({"tokens": [...], "tags": [...]} a line). InputError naming the file and line
/// for a line with too few columns, lists of different lengths, or no sentence.
std::vector<TaggedSentence> read_tagged_sentences(const std::string& path, const TaggedFormat& format);

/// The sorted distinct tags of `sentences` mapped to 0..n-1 (HF run_ner's label list).
std::map<std::string, int64_t> make_tag_map(const std::vector<TaggedSentence>& sentences);

/// The subwords of one word as a token classifier sees it alone: byte-level BPE
/// (GPT-2, RoBERTa) with its leading space (HF's is_split_into_words), WordPiece and
/// SentencePiece (its dummy prefix) as the word itself.
std::vector<int32_t> encode_word(const tokenizer::Tokenizer& tok, const std::string& word);

/// A model input covering words [first_word, first_word + positions.size()) of one
/// sentence; positions[k] is the token index of word k's first subword.
struct WordWindow {
  int64_t sentence = 0, first_word = 0;
  std::vector<int64_t> positions;
};

struct TokenTaskOptions {
  int64_t max_length = 128;         ///< tokens per example, special tokens included
  bool label_all_subwords = false;  ///< every subword carries its word's tag (B-X continued as I-X)
  std::string length_flag = "--max-length";  ///< the flag max_length came from, for messages
};

/// Token classification examples: each sentence in the tokenizer's template,
/// split at word boundaries into windows of at most max_length tokens (never cut:
/// a word that cannot fit one window is an InputError). A tag outside `tag_map` is
/// an InputError naming the file and line.
class TokenClassificationDataset : public Dataset {
 public:
  TokenClassificationDataset(std::vector<TaggedSentence> sentences, const std::string& path,
                             const tokenizer::Tokenizer& tok, const std::map<std::string, int64_t>& tag_map,
                             const TokenTaskOptions& options);
  int64_t size(int64_t) const override { return static_cast<int64_t>(examples_.size()); }
  Example get(int64_t index, int64_t) const override { return examples_[static_cast<size_t>(index)]; }
  int64_t length_hint(int64_t index) const override {
    return static_cast<int64_t>(examples_[static_cast<size_t>(index)].input_ids.size());
  }
  const std::vector<TaggedSentence>& sentences() const { return sentences_; }
  /// Example i's words, in example order (sentences in order, windows in order).
  const std::vector<WordWindow>& windows() const { return windows_; }

 private:
  std::vector<TaggedSentence> sentences_;
  std::vector<WordWindow> windows_;
  std::vector<Example> examples_;
};

}  // namespace lmkit::data
