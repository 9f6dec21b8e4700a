#include "lmkit/eval/classification.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>

#include "lmkit/core/stop.h"
#include "lmkit/data/loader.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

namespace {

// Regression: MSE, Pearson and Spearman (null for constant gold scores); classification:
// accuracy, macro-F1, MCC, and a two-label task's F1 as GLUE reports it.
Json figures(const Predictions& p, int64_t num_labels) {
  Json r = Json::object();
  if (!p.values.empty()) {
    double mse = 0;
    for (size_t i = 0; i < p.values.size(); ++i) mse += (p.values[i] - p.targets[i]) * (p.values[i] - p.targets[i]);
    r["mse"] = mse / static_cast<double>(p.values.size());
    // Constant gold scores have no correlation to report (scipy gives NaN): null, said on stderr.
    const bool constant = std::all_of(p.targets.begin(), p.targets.end(), [&](double t) { return t == p.targets.front(); });
    if (constant) {
      std::fprintf(stderr, "warning: every gold score is %g: Pearson and Spearman are undefined (null)\n", p.targets.front());
      r["pearson"] = nullptr, r["spearman"] = nullptr;
    } else {
      r["pearson"] = pearson(p.values, p.targets);
      r["spearman"] = spearman(p.values, p.targets);
    }
  } else {
    const auto s = classification_scores(p.labels, p.predicted);
    r["accuracy"] = s.accuracy;
    r["macro_f1"] = s.macro_f1;
    r["mcc"] = s.mcc;
    // A two-label task's F1 as GLUE reports it (MRPC): of label id 1, the second label in sorted order.
    if (num_labels == 2) r["f1"] = s.positive_f1;
  }
  return r;
}

}  // namespace

Json evaluate_classifier(models::Model& model, std::shared_ptr<const data::Dataset> dataset, int64_t batch_size,
                         int32_t pad_id, c10::Device device, Predictions* out) {
  const data::LoaderOptions lo = data::in_order(batch_size, pad_id);
  data::Loader loader(std::move(dataset), lo);
  const int64_t n = loader.batches_per_epoch(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  Predictions p;
  double loss_sum = 0;
  int64_t examples = 0, num_labels = 0;
  for (int64_t i = 0; i < n; ++i) {
    check_stop("evaluation");
    Batch b = loader.next();
    Output o = model.forward(b.to(device));
    const int64_t rows = b.rows();  // texts or images
    loss_sum += o.loss.item<double>() * static_cast<double>(rows);
    examples += rows;
    at::Tensor logits = o.logits.to(at::kCPU).to(at::kFloat);
    num_labels = logits.size(1);
    if (logits.size(1) == 1) {
      for (int64_t r = 0; r < rows; ++r) {
        p.values.push_back(logits[r][0].item<double>());
        p.targets.push_back(b.labels[r].item<double>());
      }
    } else {
      at::Tensor probs = logits.softmax(-1);
      at::Tensor predicted = logits.argmax(-1);
      for (int64_t r = 0; r < rows; ++r) {
        p.labels.push_back(b.labels[r].item<int64_t>());
        p.predicted.push_back(predicted[r].item<int64_t>());
        auto row = probs[r];
        p.probabilities.emplace_back(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
      }
    }
  }
  Json r = figures(p, num_labels);
  r["loss"] = loss_sum / static_cast<double>(std::max<int64_t>(examples, 1));
  r["examples"] = examples;
  if (out) *out = std::move(p);
  return r;
}

std::string predictions_tsv(const Predictions& p, const std::map<std::string, int64_t>& label_map) {
  if (label_map.empty()) {
    std::string tsv = "index\ttarget\tprediction\n";
    for (size_t i = 0; i < p.values.size(); ++i) {
      tsv += std::to_string(i) + "\t" + std::to_string(p.targets[i]) + "\t" + std::to_string(p.values[i]) + "\n";
    }
    return tsv;
  }
  std::vector<std::string> names(label_map.size());
  for (const auto& [name, id] : label_map) names.at(static_cast<size_t>(id)) = name;
  std::string tsv = "index\tlabel\tprediction\tprobabilities\n";
  for (size_t i = 0; i < p.predicted.size(); ++i) {
    std::string probs;
    for (float x : p.probabilities[i]) probs += (probs.empty() ? "" : ",") + std::to_string(x);
    tsv += std::to_string(i) + "\t" + names.at(static_cast<size_t>(p.labels[i])) + "\t" +
           names.at(static_cast<size_t>(p.predicted[i])) + "\t" + probs + "\n";
  }
  return tsv;
}

}  // namespace lmkit::eval
