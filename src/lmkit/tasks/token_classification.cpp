// --task token-classification: a tag per word (CoNLL, JSONL or Parquet), scored by seqeval's entity F1.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/rows.h"
#include "lmkit/data/token_tasks.h"
#include "lmkit/data/text_input.h"
#include "lmkit/eval/token_classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/builtin.h"

namespace lmkit::tasks {

namespace {

class TokenClassification : public Task {
 public:
  void add_flags(CLI::App& app, Mode mode) override {
    app.add_option("--label-names", names_file_,
                   "token-classification: the tag names of integer JSONL tags (HF datasets' ClassLabel ids), one a line in "
                   "id order" + std::string(mode == Mode::kEvaluate ? " (default: as finetuned)" : ""));
    if (mode == Mode::kFinetune) {
      app.add_flag("--label-all-subwords", label_all_,
                   "token-classification: every subword carries its word's tag (B-X continued as I-X), not only the first");
    }
  }

  Prepared prepare(const Context& c, const std::string& train, const std::string& dev) override {
    format_ = format_of(c, Json::object());
    check_columns(c, train);
    auto train_sentences = data::read_tagged_sentences(train, format_);
    auto tag_map = data::make_tag_map(train_sentences);
    Prepared p;
    p.num_labels = static_cast<int64_t>(tag_map.size());
    check_input(p.num_labels >= 2, train + ": needs at least two tags");
    const data::TokenTaskOptions options{c.max_length, label_all_};
    p.train_set = std::make_shared<data::TokenClassificationDataset>(std::move(train_sentences), train, c.tokenizer, tag_map, options);
    auto dev_sentences = data::read_tagged_sentences(dev, format_);
    c.first_examples(dev_sentences);
    auto dev_set = std::make_shared<data::TokenClassificationDataset>(std::move(dev_sentences), dev, c.tokenizer, tag_map, options);
    p.dev_examples = dev_set->size(0);
    p.label_map = tag_map;
    p.evaluate = [dev_set, tag_map, batch = c.batch_size, pad = c.pad_id, device = c.device](models::Model& m,
                                                                                          const std::string& out) {
      return score(m, *dev_set, tag_map, batch, pad, device, out);
    };
    return p;
  }

  Json info() const override {
    return {{"label_all_subwords", label_all_}, {"tag_column", format_.tag_column}, {"tokens_field", format_.tokens_field},
            {"tags_field", format_.tags_field}, {"label_names", format_.label_names}};
  }

  void use_info(const Json& info, const CLI::App&) override {
    info_ = info;
    label_all_ = info.value("label_all_subwords", false);
  }

  Json evaluate(models::Model& model, const Context& c, const std::string& path, const std::string& predictions) override {
    const int64_t num_labels = static_cast<int64_t>(model.config_json().value("id2label", Json::object()).size());
    const auto tag_map = data::load_label_map(c.checkpoint, num_labels);
    const int64_t length = c.length_within_positions(128);
    const data::TokenTaskOptions options{length, label_all_, c.given("--seq-len") ? "--seq-len" : "--max-length (as finetuned)"};
    auto sentences = data::read_tagged_sentences(path, format_of(c, info_));
    c.first_examples(sentences);
    const data::TokenClassificationDataset ds(std::move(sentences), path, c.tokenizer, tag_map, options);
    Json r = score(model, ds, tag_map, c.batch_size, c.pad_id, c.device, predictions);
    r["max_length"] = length;
    return r;
  }

  std::string best_metric() const override { return "f1"; }

  std::string describe(const Json& r) const override {
    char line[160];
    std::snprintf(line, sizeof line, "entity F1 %.4f (precision %.4f, recall %.4f), token accuracy %.4f", r["f1"].get<double>(),
                  r["precision"].get<double>(), r["recall"].get<double>(), r["accuracy"].get<double>());
    return line;
  }

  std::string result_name() const override { return "token-classification"; }

 private:
  // How the files are read: finetune.json's record (`info`), --format, --text-column (the JSONL words
  // field) and --label-column (the CoNLL tag column or the JSONL tags field) over it.
  data::TaggedFormat format_of(const Context& c, const Json& info) const {
    data::TaggedFormat f;
    f.label_names = names_file_.empty() ? info.value("label_names", f.label_names) : read_names(names_file_);
    f.tag_column = info.value("tag_column", f.tag_column);
    f.tokens_field = info.value("tokens_field", f.tokens_field);
    f.tags_field = info.value("tags_field", f.tags_field);
    f.format = c.columns.format;
    if (c.given("--text-column")) f.tokens_field = c.columns.text;
    if (c.given("--label-column")) data::set_tag_source(f, c.columns.label);
    return f;
  }

  // CoNLL has no named fields: its word is the first column, its tag a column number.
  void check_columns(const Context& c, const std::string& path) const {
    const bool conll = format_.format == "conll" || (format_.format == "auto" && !data::json_rows(path));
    if (!conll) return;
    const std::string& label = c.columns.label;
    check_input(!c.given("--label-column") || (!label.empty() && label.find_first_not_of("0123456789") == std::string::npos),
                "--label-column " + label + " names a JSONL field, but " + path + " is CoNLL: give the tag's column number");
    check_input(!c.given("--text-column"), "--text-column names a JSONL field, but " + path +
                                               " is CoNLL (its word is the first column)");
  }

  static std::vector<std::string> read_names(const std::string& file) {
    std::vector<std::string> names;
    for (const auto& line : read_lines(file)) {
      if (!line.empty()) names.push_back(line);
    }
    check_input(!names.empty(), file + ": no tag names (one a line, in id order)");
    return names;
  }

  static Json score(models::Model& m, const data::TokenClassificationDataset& ds, const std::map<std::string, int64_t>& tag_map,
                    int64_t batch, int32_t pad, c10::Device device, const std::string& out) {
    std::vector<std::vector<std::string>> predicted;
    Json r = eval::evaluate_token_classifier(m, ds, tag_map, batch, pad, device, out.empty() ? nullptr : &predicted);
    if (!out.empty()) write_file_atomic(out, eval::predictions_conll(ds.sentences(), predicted));
    return r;
  }

  bool label_all_ = false;
  std::string names_file_;
  data::TaggedFormat format_;
  Json info_ = Json::object();
};

}  // namespace

TaskSpec token_classification_task() {
  TaskSpec t;
  t.name = "token-classification";
  t.summary = "a tag per word (CoNLL, JSONL or Parquet), scored by seqeval's entity F1";
  t.head = models::kTokenClassificationHead;
  t.metric = "token-classification";
  t.predictions = "predictions.conll";
  t.suite_types = {{"token-classification", {"f1", "precision", "recall", "accuracy"}, {"f1"}, {}, {}, false}};
  t.suite_keys = {{"format", "--format", KeyValue::kString, false},
                  {"text_column", "--text-column", KeyValue::kColumn, false},
                  {"label_column", "--label-column", KeyValue::kColumn, false},
                  {"label_all_subwords", "--label-all-subwords", KeyValue::kBool, false}};
  t.create = [] { return std::make_unique<TokenClassification>(); };
  return t;
}

}  // namespace lmkit::tasks
