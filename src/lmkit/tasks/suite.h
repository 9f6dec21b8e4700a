// A suite: finetuning and in-context tasks read from one JSON file (suites/glue.json),
// each turned into the lmkit-finetune and lmkit-evaluate flags that run it, and the
// runs' result files summarised into a GLUE-style table (mean ± sd over seeds, the
// average of the task scores, the difference to a baseline). lmkit-suite runs it
// (docs/suite.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::tasks {

struct SuiteTask {
  std::string name;   ///< [A-Za-z0-9_.-]+: its folder in the output directory
  std::string label;  ///< the table's column heading (default: name)
  std::string type;   ///< as the file says: classification, pair-classification, regression, ..., in-context
  /// The finetuning task that runs it (tasks::TaskSpec; its suite_types name the types); "" for an
  /// in-context evaluation of the checkpoint itself.
  std::string task;
  bool percentages = false;  ///< its figures are 0–100 already (BLEU), not fractions
  std::vector<std::string> metrics;  ///< reported figures; the task's score is their mean
  /// Metrics of the registry run on the finetuned checkpoint besides the task's own ("evaluate":
  /// a plugin's calibration), on the test set (or dev); their figures are METRIC.FIGURE.
  std::vector<std::string> also_evaluate;
  std::vector<int64_t> seeds;
  std::string train, dev, test;      ///< resolved paths (test: optional; the figures are then the test set's)
  std::vector<std::string> data;     ///< in-context task files
  std::vector<std::string> finetune_flags;  ///< lmkit-finetune's task flags (no --train/--dev/--output/--seed)
  std::vector<std::string> evaluate_flags;  ///< lmkit-evaluate's (test set, or the in-context task)
  Json definition;  ///< the task as resolved: a finished run of another definition is run again

  bool finetuned() const { return !task.empty(); }
  /// The seeds that give different runs: a zero-shot in-context task runs once.
  std::vector<int64_t> run_seeds() const;
  /// What its figures measure: "dev", "test" (a finetuned task with a test set) or "K-shot" (in-context).
  std::string split() const;
};

struct Suite {
  std::string name, path, description;
  std::vector<SuiteTask> tasks;
};

/// Reads a suite file. Relative data paths are resolved against `data_root`.
/// InputError naming the file and the key for an unknown key, a wrong type, an
/// unknown task type or metric, a missing required key or a duplicate task name.
Suite read_suite(const std::string& path, const std::string& data_root);

/// Keeps the tasks named in `names` (in the suite's order); InputError naming an unknown one.
void select_tasks(Suite& suite, const std::vector<std::string>& names);

/// The figures of one task from its runs' result files, one per seed (in the order
/// of run_seeds()). Percentages (0–100) throughout: fractions are scaled by 100.
/// InputError naming the file when a metric is missing from it.
Json task_figures(const SuiteTask& task, const std::vector<Json>& results, const std::vector<int64_t>& seeds);

/// One row of the table: each task's figures (null where the task does not apply
/// to the model), and the average of the task scores with its sd over seeds.
Json suite_row(const Suite& suite, const std::string& label, const Json& init, const Json& tasks);

/// The difference of two rows (a - b), task by task and in the average (over the tasks both rows have).
Json row_difference(const Json& a, const Json& b);

/// The Markdown table of rows (and the difference row when given), with a line
/// saying what the cells are.
std::string suite_markdown(const Suite& suite, const std::vector<Json>& rows, const Json& difference);

/// Mean and sample standard deviation (n - 1; 0 for one value).
std::pair<double, double> mean_sd(const std::vector<double>& values);

}  // namespace lmkit::tasks
