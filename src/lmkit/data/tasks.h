// Supervised data: parallel text for seq2seq, labelled rows for classification.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/data/dataset.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

/// One source/target pair before tokenization (line: where it is, for errors).
struct TextPair {
  std::string source, target;
  int64_t line = 0;
};

/// How a text-to-text example becomes token ids.
struct Seq2SeqOptions {
  int64_t max_source_length = 512;   ///< encoder input (or decoder-only prompt) tokens, EOS/separator included
  int64_t max_target_length = 128;   ///< target tokens, EOS included
  std::string source_prefix;         ///< prepended to every source (T5's "translate German to English: ")
  bool decoder_only = false;         ///< one sequence: source, separator, target, EOS (GPT)
  std::string separator = "\n";      ///< decoder_only: between the source and the target
  bool require_targets = true;       ///< an empty target is an InputError naming its line
};

/// Text-to-text examples. Encoder–decoder: input = prefix + source + EOS,
/// labels = target + EOS. Decoder-only: input = prefix + source, separator,
/// target, EOS with labels -100 on the prompt (the loss is on the target alone).
/// A source or target longer than its maximum is cut at the end (the decoder-only
/// prompt keeps its separator) and counted in truncated().
class Seq2SeqDataset : public Dataset {
 public:
  Seq2SeqDataset(const std::vector<TextPair>& pairs, const std::string& path, const tokenizer::Tokenizer& tokenizer,
                 const Seq2SeqOptions& options);
  /// Parallel files line by line (Multi30k's train.de / train.en), for pretraining.
  Seq2SeqDataset(const std::string& source_file, const std::string& target_file, const tokenizer::Tokenizer& tokenizer,
                 int64_t max_source_length, int64_t max_target_length);
  int64_t size(int64_t) const override { return static_cast<int64_t>(prompts_.size()); }
  Example get(int64_t index, int64_t epoch) const override;
  int64_t length_hint(int64_t index) const override {
    const auto i = static_cast<size_t>(index);
    return static_cast<int64_t>(prompts_[i].size() + (decoder_only_ ? targets_[i].size() : 0));
  }
  /// What generation starts from: the encoder input, or the decoder-only prompt.
  const std::vector<std::vector<int32_t>>& prompts() const { return prompts_; }
  /// The target texts, in order (the references of generation metrics).
  const std::vector<std::string>& references() const { return references_; }
  int64_t truncated_sources() const { return truncated_sources_; }
  int64_t truncated_targets() const { return truncated_targets_; }

 private:
  void add(const TextPair& pair, const tokenizer::Tokenizer& tok, const Seq2SeqOptions& options, int32_t eos,
           const std::vector<int32_t>& separator);
  std::vector<std::vector<int32_t>> prompts_, targets_;
  std::vector<std::string> references_;
  bool decoder_only_ = false;
  int64_t truncated_sources_ = 0, truncated_targets_ = 0;
};

/// Parallel files aligned line by line; InputError when their line counts differ.
std::vector<TextPair> read_parallel_files(const std::string& source_file, const std::string& target_file);

/// Where the columns of a labelled file are.
struct ColumnSpec {
  std::string text = "sentence";   ///< a header name, or a 0-based index for files without a header
  std::string text_pair;           ///< optional second text (sentence pairs)
  std::string label = "label";
  std::string format = "auto";     ///< auto (by extension), tsv, csv, jsonl
  bool regression = false;         ///< labels are numbers (num_labels = 1)
};

/// One labelled row before tokenization.
struct LabelledRow {
  std::string text, text_pair, label;
  int64_t line = 0;
};

/// Reads labelled rows. TSV/CSV files with a header name columns by name; files
/// without one (a header is assumed when every column spec is a name) by index.
/// Missing columns and malformed rows are InputErrors naming the file and line.
std::vector<LabelledRow> read_labelled_rows(const std::string& path, const ColumnSpec& columns);

/// Sentence(-pair) classification: [CLS] a [SEP] (b [SEP]) for BERT,
/// a (`<eos>` b) `<eos>` for GPT (the last token is pooled), a (`</s>` b) `</s>` for T5;
/// truncated to max_length (the longer text first).
class ClassificationDataset : public Dataset {
 public:
  /// `label_map` maps label strings to class ids (build it from the training
  /// file with make_label_map); a label outside it is an InputError with file and line.
  /// `max_rows` > 0 reads only the file's first that many rows.
  ClassificationDataset(const std::string& path, const ColumnSpec& columns, const tokenizer::Tokenizer& tokenizer,
                        int64_t max_length, const std::map<std::string, int64_t>& label_map, int64_t max_rows = 0);
  int64_t size(int64_t) const override { return static_cast<int64_t>(examples_.size()); }
  Example get(int64_t index, int64_t) const override { return examples_[static_cast<size_t>(index)]; }
  int64_t length_hint(int64_t index) const override {
    return static_cast<int64_t>(examples_[static_cast<size_t>(index)].input_ids.size());
  }

 private:
  std::vector<Example> examples_;
};

/// Where a text-to-text set is: two columns of a TSV/CSV/JSONL file (names, or
/// 0-based indexes for files without a header), or parallel files PATH.SRC and
/// PATH.TGT when the languages are given (Multi30k's layout).
struct PairSpec {
  std::string source = "source", target = "target";
  std::string format = "auto";
  std::string source_lang, target_lang;
};
/// Reads the pairs `spec` describes from `path`; InputError naming file and line for
/// a missing column or a malformed row.
std::vector<TextPair> read_text_pairs(const std::string& path, const PairSpec& spec);

/// The sorted distinct labels of `rows` (read from `path`) mapped to 0..n-1; numbers sort
/// numerically, and two spellings of one number ("1", "1.0") are an InputError naming the line.
std::map<std::string, int64_t> make_label_map(const std::vector<LabelledRow>& rows, const std::string& path = "labels");

/// The label map of a finetuned classifier with `num_labels` outputs in checkpoint
/// `dir`: its label_map.json (lmkit-finetune writes one), else config.json's
/// id2label (HF's). Empty for a regression head (num_labels 1). InputError naming
/// the file unless the map is a bijection from label strings onto 0..num_labels-1.
std::map<std::string, int64_t> load_label_map(const std::string& dir, int64_t num_labels);

/// The first `n` examples of a dataset (all of them when it has fewer): a training
/// budget, as HuggingFace's --max_train_samples.
class FirstExamples : public Dataset {
 public:
  FirstExamples(std::shared_ptr<const Dataset> base, int64_t n) : base_(std::move(base)), n_(n) {}
  int64_t size(int64_t epoch) const override { return std::min(base_->size(epoch), n_); }
  Example get(int64_t index, int64_t epoch) const override { return base_->get(index, epoch); }
  int64_t length_hint(int64_t index) const override { return base_->length_hint(index); }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t n_;
};

}  // namespace lmkit::data
