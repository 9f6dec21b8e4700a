// --task classification: a label (or, with --regression, a number) per text or text pair.
#include <ATen/ATen.h>

#include <cstdio>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/eval/classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/builtin.h"

namespace lmkit::tasks {

namespace {

class Classification : public Task {
 public:
  void add_flags(CLI::App& app, Mode mode) override {
    app.add_option("--text-pair-column", text_pair_, "classification: second text column for sentence pairs" +
                                                         std::string(mode == Mode::kEvaluate ? " (default: as finetuned)" : ""));
    if (mode == Mode::kFinetune) {
      app.add_flag("--regression", regression_, "classification: numeric labels, one output (MSE; Pearson/Spearman)");
    }
  }

  Prepared prepare(const Context& c, const std::string& train, const std::string& dev) override {
    columns_ = c.columns;
    columns_.text_pair = text_pair_;
    columns_.regression = regression_;
    std::map<std::string, int64_t> label_map;
    if (!regression_) label_map = data::make_label_map(data::read_labelled_rows(train, columns_), train);
    Prepared p;
    p.num_labels = regression_ ? 1 : static_cast<int64_t>(label_map.size());
    check_input(regression_ || p.num_labels >= 2, train + ": needs at least two labels");
    p.train_set = std::make_shared<data::ClassificationDataset>(train, columns_, c.tokenizer, c.max_length, label_map);
    auto dev_set = std::make_shared<data::ClassificationDataset>(dev, columns_, c.tokenizer, c.max_length, label_map, c.max_examples);
    p.dev_examples = dev_set->size(0);
    if (!regression_) p.label_map = label_map;
    p.evaluate = [dev_set, label_map, batch = c.batch_size, pad = c.pad_id, device = c.device](models::Model& m,
                                                                                            const std::string& out) {
      eval::Predictions predictions;
      Json r = eval::evaluate_classifier(m, dev_set, batch, pad, device, out.empty() ? nullptr : &predictions);
      if (!out.empty()) write_file_atomic(out, eval::predictions_tsv(predictions, label_map));
      return r;
    };
    return p;
  }

  Json info() const override {
    return {{"text_column", columns_.text}, {"text_pair_column", columns_.text_pair}, {"label_column", columns_.label},
            {"format", columns_.format}, {"regression", columns_.regression}};
  }

  void use_info(const Json& info, const CLI::App&) override { info_ = info; }

  Json evaluate(models::Model& model, const Context& c, const std::string& path, const std::string& predictions) override {
    const int64_t num_labels = static_cast<int64_t>(model.config_json().value("id2label", Json::object()).size());
    const auto label_map = data::load_label_map(c.checkpoint, num_labels);
    data::ColumnSpec cols = c.columns;
    auto pick = [&](const char* flag, const char* key, std::string& value) {
      if (!c.given(flag)) value = info_.value(key, value);
    };
    pick("--text-column", "text_column", cols.text), pick("--label-column", "label_column", cols.label);
    pick("--format", "format", cols.format);
    cols.text_pair = c.given("--text-pair-column") ? text_pair_ : info_.value("text_pair_column", text_pair_);
    cols.regression = num_labels == 1;
    const int64_t length = c.length_within_positions(128);
    auto ds = std::make_shared<data::ClassificationDataset>(path, cols, c.tokenizer, length, label_map, c.max_examples);
    eval::Predictions p;
    Json r = eval::evaluate_classifier(model, ds, c.batch_size, c.pad_id, c.device, predictions.empty() ? nullptr : &p);
    if (!predictions.empty()) write_file_atomic(predictions, eval::predictions_tsv(p, label_map));
    r["max_length"] = length;
    return r;
  }

  std::string best_metric() const override { return regression_ ? "pearson" : "accuracy"; }

  std::string describe(const Json& r) const override {
    char line[160];
    if (r.contains("pearson")) {
      if (!r["pearson"].is_number()) return "pearson and spearman undefined (constant gold scores)";
      std::snprintf(line, sizeof line, "pearson %.4f, spearman %.4f", r["pearson"].get<double>(), r["spearman"].get<double>());
    } else {
      std::snprintf(line, sizeof line, "accuracy %.4f, macro-F1 %.4f, MCC %.4f", r["accuracy"].get<double>(),
                    r["macro_f1"].get<double>(), r["mcc"].get<double>());
    }
    return line;
  }

  std::string result_name() const override { return regression_ ? "regression" : "classification"; }

 private:
  std::string text_pair_;
  bool regression_ = false;
  data::ColumnSpec columns_;
  Json info_ = Json::object();
};

}  // namespace

TaskSpec classification_task() {
  TaskSpec t;
  t.name = "classification";
  t.summary = "a label per text or text pair (--regression: a number)";
  t.head = models::kClassificationHead;
  t.metric = "classification";
  t.predictions = "predictions.tsv";
  const std::vector<std::string> figures = {"accuracy", "macro_f1", "mcc", "f1"};
  t.suite_types = {{"classification", figures, {"accuracy"}, {}, {}, false},
                   {"pair-classification", figures, {"accuracy"}, {}, {"text_pair_column"}, false},
                   {"regression", {"pearson", "spearman"}, {"pearson", "spearman"}, {"--regression"}, {}, false}};
  t.suite_keys = {{"format", "--format", KeyValue::kString, true},
                  {"text_column", "--text-column", KeyValue::kColumn, true},
                  {"text_pair_column", "--text-pair-column", KeyValue::kColumn, true},
                  {"label_column", "--label-column", KeyValue::kColumn, true}};
  t.create = [] { return std::make_unique<Classification>(); };
  return t;
}

}  // namespace lmkit::tasks
