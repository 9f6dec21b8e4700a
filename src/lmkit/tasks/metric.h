// Metrics: what lmkit-evaluate measures a checkpoint with (--metric), in one registry
// like the tasks', that programs and plugins add to (docs/library.md, "Writing a
// metric"). A metric says what it reads (--data as a text or corpus, or files it reads
// itself), which flags it takes, where it applies (families, architectures), and runs;
// lmkit-evaluate lists them in --help, refuses a flag the chosen one does not take,
// and writes and prints the result. Every finetuning task's metric is one (its `metric`
// name runs the task's evaluate on a checkpoint it finetuned).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/tasks/task.h"  // Task, TaskFlags, the app and data types a metric shares with tasks

namespace lmkit::tasks {

/// What lmkit-evaluate runs a metric with: the common flags' values, the checkpoint's
/// tokenizer and the parsed flags (a metric's own flags: `app["--bins"]->as<int>()`).
struct MetricInputs {
  std::string checkpoint;                 ///< --checkpoint
  std::vector<std::string> data;          ///< --data: one file, or several where MetricSpec::many_data
  const tokenizer::Tokenizer& tokenizer;  ///< the checkpoint's
  c10::Device device = c10::kCPU;
  int64_t batch_size = 8;                 ///< --batch-size
  int64_t seq_len = 0;                    ///< --seq-len (0: not given; each metric has its default)
  int64_t max_examples = 0;               ///< --max-eval-examples (0: all)
  data::ColumnSpec columns;               ///< --text-column, --label-column, --format
  std::string predictions;                ///< --predictions ("": none)
  std::string work;                       ///< a scratch folder, removed after the run (a text file's corpus)
  const CLI::App& app;                    ///< the parsed flags
  TaskFlags* tasks = nullptr;             ///< the finetuning tasks' instances (a task's metric runs its own)

  /// The checkpoint's model ("": its own architecture; else that head), its vocabulary checked
  /// against the tokenizer. `companions_required`: a companion it lacks is an InputError.
  std::shared_ptr<models::Model> load(const std::string& architecture = "", bool companions_required = false) const;
  /// The value of the flag `name` the metric added, or `fallback` when it was not given.
  template <class T>
  T flag(const std::string& name, T fallback) const {
    return app.count(name) ? app.get_option(name)->as<T>() : fallback;
  }
};

struct MetricSpec {
  std::string name;     ///< as --metric spells it
  std::string summary;  ///< one line for --help
  /// --data is a text file or token corpus that lmkit-evaluate checks before the model loads
  /// (a metric reading files of its own checks them itself).
  bool corpus_data = false;
  bool many_data = false;     ///< --data is repeatable
  bool predictions = false;   ///< takes --predictions
  bool max_examples = false;  ///< takes --max-eval-examples
  bool prints_itself = false; ///< prints its own table (lmkit-evaluate prints none)
  /// Adds the metric's own flags (nullptr: none), unbound: run() reads them through MetricInputs::flag.
  /// A flag another metric added already is shared, not added twice.
  std::function<void(CLI::App& app)> add_flags;
  /// Flags of others the metric reads too (bleu: the generation task's --beams, --max-new-tokens).
  std::vector<std::string> also_reads;
  /// "" when the metric applies to a checkpoint of `family` with `config`; else why not, one line
  /// (nullptr: every checkpoint). Checked before the model loads.
  std::function<std::string(const models::Family& family, const Json& config)> refuses;
  std::function<Json(const MetricInputs& inputs)> run;
  std::string task;    ///< the finetuning task whose metric it is ("": none)
  std::string source;  ///< who registered it: "lmkit", or a plugin's path (register_metric sets it)
};

/// Every metric: lmkit's own, each finetuning task's, then those registered, in --help's order.
std::vector<MetricSpec> metrics();
/// Adds a metric (from a program or a plugin). Its name must be new: InputError naming both
/// registrants otherwise (a task's metric counts).
void register_metric(MetricSpec spec);
/// The metric `name`; InputError listing them otherwise.
MetricSpec metric(const std::string& name);
/// "perplexity: ...; bleu: ...": each metric's name and summary, for --metric's help.
std::string metric_help();

/// The flags every metric added to lmkit-evaluate, by metric.
struct MetricFlags {
  std::vector<std::pair<std::string, std::vector<std::string>>> added;  ///< (metric, the flags it added)
  /// InputError for a flag given that `chosen` neither added nor reads ("--references applies to --metric bleu").
  void check_given(const CLI::App& app, const MetricSpec& chosen) const;
};
/// Adds every metric's own flags to `app` (before parsing).
MetricFlags add_metric_flags(CLI::App& app);

}  // namespace lmkit::tasks
