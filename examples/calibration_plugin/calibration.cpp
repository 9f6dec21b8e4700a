// A metric as an lmkit plugin: the expected calibration error of a finetuned classifier
// (Guo et al. 2017, "On Calibration of Modern Neural Networks"). The examples are put in
// --bins equal-width bins of confidence (the top class's probability); ECE is the
// examples-weighted mean over bins of |accuracy - mean confidence|, MCE the largest gap.
//   lmkit-evaluate --plugin liblmkit_calibration.so --checkpoint runs/sst2/best --data dev.tsv --metric calibration
#include <algorithm>
#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/eval/classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"

namespace {

using namespace lmkit;

// The checkpoint's data as lmkit-finetune read it (finetune.json), the flags given over it.
std::shared_ptr<data::ClassificationDataset> examples(const tasks::MetricInputs& in, int64_t num_labels) {
  const Json info = tasks::read_info(in.checkpoint, "classification");
  data::ColumnSpec cols = in.columns;
  if (!in.app.count("--text-column")) cols.text = info.value("text_column", cols.text);
  if (!in.app.count("--label-column")) cols.label = info.value("label_column", cols.label);
  if (!in.app.count("--format")) cols.format = info.value("format", cols.format);
  cols.text_pair = in.flag<std::string>("--text-pair-column", info.value("text_pair_column", std::string()));
  const int64_t length = in.seq_len > 0 ? in.seq_len : info.value("max_length", int64_t{128});
  return std::make_shared<data::ClassificationDataset>(in.data.back(), cols, in.tokenizer, length,
                                                       data::load_label_map(in.checkpoint, num_labels), in.max_examples);
}

Json calibration(const tasks::MetricInputs& in) {
  const int64_t bins = in.flag<int64_t>("--bins", 15);
  auto model = in.load();
  const int64_t num_labels = static_cast<int64_t>(model->config_json().value("id2label", Json::object()).size());
  check_input(num_labels >= 2, in.checkpoint + ": --metric calibration needs a classifier of two or more labels");
  model->to(in.device);
  eval::Predictions p;
  const Json figures = eval::evaluate_classifier(*model, examples(in, num_labels), in.batch_size, data::pad_id(in.tokenizer),
                                                 in.device, &p);
  std::vector<double> confidence(static_cast<size_t>(bins)), right(static_cast<size_t>(bins));
  std::vector<int64_t> count(static_cast<size_t>(bins));
  for (size_t i = 0; i < p.labels.size(); ++i) {
    const double c = *std::max_element(p.probabilities[i].begin(), p.probabilities[i].end());
    const auto b = static_cast<size_t>(std::min<int64_t>(bins - 1, static_cast<int64_t>(c * static_cast<double>(bins))));
    confidence[b] += c, right[b] += p.predicted[i] == p.labels[i], ++count[b];
  }
  double ece = 0, mce = 0;
  Json table = Json::object();
  for (size_t b = 0; b < count.size(); ++b) {
    if (count[b] == 0) continue;
    const double n = static_cast<double>(count[b]), gap = std::abs(right[b] / n - confidence[b] / n);
    ece += n / static_cast<double>(p.labels.size()) * gap, mce = std::max(mce, gap);
    table[std::to_string(b)] = {{"examples", count[b]}, {"accuracy", right[b] / n}, {"confidence", confidence[b] / n}};
  }
  return {{"ece", ece}, {"mce", mce}, {"accuracy", figures["accuracy"]}, {"bins", bins},
          {"examples", static_cast<int64_t>(p.labels.size())}, {"by_bin", table}};
}

void register_calibration() {
  tasks::MetricSpec m;
  m.name = "calibration";
  m.summary = "expected and maximum calibration error of a finetuned classifier (--bins)";
  m.max_examples = true;
  m.add_flags = [](CLI::App& app) {
    app.add_option("--bins", "calibration: equal-width confidence bins (default 15)")->type_name("INT")->check(CLI::Range(1, 1000));
  };
  m.also_reads = {"--text-pair-column"};  // the classification task's, as it finetuned
  m.refuses = [](const models::Family& family, const Json& config) -> std::string {
    const std::string head = family.head(models::kClassificationHead), own = config.value("architectures", Json::array()).empty()
                                 ? "" : config["architectures"][0].get<std::string>();
    return !head.empty() && own == head ? "" : "--metric calibration scores a classifier finetuned with --task classification (" +
                                                   (head.empty() ? family.model_type + " has none" : head) + "), not " +
                                                   (own.empty() ? "this checkpoint" : own);
  };
  m.run = calibration;
  tasks::register_metric(m);
}

}  // namespace

LMKIT_PLUGIN(register_calibration)
