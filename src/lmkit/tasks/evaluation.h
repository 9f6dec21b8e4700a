// What lmkit-evaluate does around a metric (metric.h): the checks before the model loads
// (what the metric reads, the result file, the checkpoint, where the metric applies), the
// stamp of the result file and the table it prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/tasks/metric.h"

namespace lmkit::tasks {

/// lmkit-evaluate's common flags.
struct EvaluationRequest {
  std::string metric, checkpoint, output, predictions;
  std::vector<std::string> data;  ///< --data, as given (one, or several where the metric reads several)
  int64_t max_examples = 0;
  bool overwrite = false;
  /// "data" as the result records it: the list where the metric reads several, else the file.
  Json data_json(bool many) const;
  /// --output, or result.json.
  std::string result_path() const;
};

/// InputError, before the model loads, for: --data repeated, --predictions or
/// --max-eval-examples where `metric` does not take them; a corpus it reads that is not
/// there; a result file that holds another evaluation (a result of the same metric,
/// checkpoint and data is its own to replace) or a user's file without --overwrite; no
/// checkpoint directory or tokenizer (a model that reads images has none: a metric of a task
/// with its head is the only one it takes); a checkpoint the metric refuses.
void check_request(const EvaluationRequest& request, const MetricSpec& metric);
/// Whether the checkpoint's model reads images (Family::images): it has no tokenizer.
bool reads_images(const std::string& checkpoint);
/// The figures stamped with the metric, the checkpoint, the data and lmkit-evaluate.
Json stamp_result(Json figures, const EvaluationRequest& request, const MetricSpec& metric);
/// A result as an aligned table on stdout: a row per figure, and a nested object (the
/// per-type scores) as a row per entry with its figures as columns.
void print_result(const Json& result);

}  // namespace lmkit::tasks
