// Extractive question answering data: SQuAD's JSON (v1.1, and v2.0's unanswerable
// questions, `is_impossible`), split into model inputs as HF's run_qa does — the question
// then a window of the context in the tokenizer's pair template, windows overlapping by
// doc_stride tokens over a long context — with the context split at whitespace into words
// first, each word's subwords its own (BERT's run_squad alignment), so every context token
// maps back to the characters of its word.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/data/dataset.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

struct SquadAnswer {
  std::string text;
  int64_t start = 0;  ///< byte offset in the context (the file's answer_start counts characters)
};

struct SquadQuestion {
  std::string id, question;
  std::vector<SquadAnswer> answers;  ///< empty for an unanswerable question
  bool impossible = false;           ///< v2.0's is_impossible
  int64_t context = 0;               ///< its paragraph in SquadSet::contexts
};

/// A context split at whitespace: each word's first byte and one past its last.
struct ContextWords {
  std::vector<int64_t> begin, end;
};

struct SquadSet {
  std::vector<std::string> contexts;
  std::vector<ContextWords> words;  ///< one a context
  std::vector<SquadQuestion> questions;
  bool with_negative = false;  ///< some question is_impossible (SQuAD v2.0)
  std::string path;
};

/// Reads SQuAD's JSON ({"data": [{"paragraphs": [{"context", "qas": [{"id", "question",
/// "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}, plain or compressed), or HF
/// datasets' squad / squad_v2 rows — a Parquet file (the Hub's) or JSON lines (to_json's), each
/// {"id", "context", "question", "answers": {"text": [...], "answer_start": [...]}}, no answer
/// for an unanswerable question — rows of one context sharing it. An
/// InputError names the file and the question for a missing field, a duplicate id, an answer
/// not found at its answer_start, or an answerable question without answers.
SquadSet read_squad(const std::string& path);

struct QaOptions {
  int64_t max_length = 384;        ///< tokens per window, special tokens included
  int64_t doc_stride = 128;        ///< tokens two windows of one context share (HF's stride)
  int64_t max_query_length = 64;   ///< the question's first tokens kept
  bool training = false;           ///< answer positions on each window (first answer)
  std::string length_flag = "--max-length";
};

/// One model input: a question and a window of its context.
struct QaFeature {
  int64_t question = 0;        ///< in SquadSet::questions
  std::vector<int32_t> input_ids, type_ids;
  std::vector<int32_t> word;   ///< each token's context word, -1 outside the context
  int64_t start = 0, end = 0;  ///< the answer's tokens (0, 0: none in this window)
};

/// Every question's windows, in question order.
class QuestionAnsweringDataset : public Dataset {
 public:
  QuestionAnsweringDataset(SquadSet set, const tokenizer::Tokenizer& tok, const QaOptions& options);
  int64_t size(int64_t) const override { return static_cast<int64_t>(features_.size()); }
  Example get(int64_t index, int64_t epoch) const override;
  int64_t length_hint(int64_t index) const override {
    return static_cast<int64_t>(features_[static_cast<size_t>(index)].input_ids.size());
  }
  const SquadSet& set() const { return set_; }
  const std::vector<QaFeature>& features() const { return features_; }

 private:
  SquadSet set_;
  std::vector<QaFeature> features_;
  bool training_ = false;
};

}  // namespace lmkit::data
