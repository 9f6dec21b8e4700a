// Classifier evaluation: predictions and metrics over a labelled dataset.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/data/dataset.h"
#include "lmkit/models/model.h"

namespace lmkit::eval {

struct Predictions {
  std::vector<int64_t> labels, predicted;        ///< classification
  std::vector<double> targets, values;           ///< regression
  std::vector<std::vector<float>> probabilities; ///< per class
};

/// Runs the classifier over every example of `dataset` in order. Returns
/// loss, accuracy, macro_f1, mcc (classification) or pearson, spearman, mse
/// (regression, num_labels 1), and examples. Fills `predictions` when given.
Json evaluate_classifier(models::Model& model, std::shared_ptr<const data::Dataset> dataset, int64_t batch_size,
                         int32_t pad_id, c10::Device device, Predictions* predictions = nullptr);

/// Predictions as the TSV lmkit-finetune writes: index, label, prediction and the
/// class probabilities under the label names of `label_map`; index, target,
/// prediction for regression (an empty map).
std::string predictions_tsv(const Predictions& predictions, const std::map<std::string, int64_t>& label_map);

}  // namespace lmkit::eval
