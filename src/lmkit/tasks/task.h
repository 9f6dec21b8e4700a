// Finetuning tasks: what lmkit-finetune trains (--task), what lmkit-evaluate measures
// a finetuned checkpoint with (--metric) and what lmkit-suite runs, in one registry
// that programs and plugins add to (docs/library.md, "Writing a task"). A task
// names the head it needs of a family, adds its own flags, builds its datasets,
// evaluates, and records in finetune.json how it read its data, so that evaluation
// reads new data the same way.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/app.h"
#include "lmkit/core/config.h"
#include "lmkit/data/dataset.h"
#include "lmkit/data/tasks.h"

namespace lmkit::tokenizer {
class Tokenizer;
}
namespace lmkit::models {
class Model;
struct Family;
}  // namespace lmkit::models

namespace lmkit::tasks {

/// The app a task's flags are added to.
enum class Mode { kFinetune, kEvaluate };

/// Everything a task reads its data and evaluates with.
struct Context {
  /// The checkpoint's (or --tokenizer's); for a model that reads images, the empty one (Tokenizer::empty()).
  const tokenizer::Tokenizer& tokenizer;
  int32_t pad_id = -1;           ///< padding of the batches (EOS where the tokenizer has no pad)
  c10::Device device = c10::kCPU;
  int64_t batch_size = 32;
  int64_t max_length = 128;      ///< tokens per example (--max-length; lmkit-evaluate: --seq-len or as finetuned)
  data::ColumnSpec columns;      ///< --text-column, --label-column, --format (how the task reads them is its own)
  const models::Family& family;  ///< the model's family
  Json model_config;             ///< the model's config.json (the preset's for a random start)
  std::string checkpoint;        ///< lmkit-evaluate: the finetuned checkpoint (its label map); lmkit-finetune: the pretrained one ("" at random)
  bool leader = true;            ///< prints notes (rank 0 of a data-parallel job)
  const CLI::App* app = nullptr; ///< the parsed flags: which were given
  /// Dev examples (lmkit-finetune --max-dev-examples) or evaluation examples (lmkit-evaluate
  /// --max-eval-examples) to read: the first that many rows, sentences or pairs (0: all).
  int64_t max_examples = 0;
  /// Keeps the first max_examples of `records` (all of them when it is 0).
  template <class T>
  void first_examples(std::vector<T>& records) const {
    if (max_examples > 0 && records.size() > static_cast<size_t>(max_examples)) records.resize(static_cast<size_t>(max_examples));
  }
  /// Whether the flag `name` was given.
  bool given(const std::string& name) const { return app != nullptr && app->count(name) > 0; }
  /// max_length, or `fallback` when it is 0, within the model's positions.
  int64_t length_within_positions(int64_t fallback) const;
};

/// A task's data, read for finetuning: the training set, and the dev set's evaluation.
struct Prepared {
  std::shared_ptr<data::Dataset> train_set;
  int64_t dev_examples = 0;
  int64_t num_labels = 0;  ///< the head's outputs; 0: the family's own generator (text-to-text)
  Json label_map;          ///< label -> id (label_map.json in every checkpoint), null for none
  std::map<std::string, Json> files;  ///< more files every checkpoint carries: name -> content (preprocessor_config.json)
  /// The dev figures of `model`; with `predictions` (a path), its predictions file too.
  std::function<Json(models::Model& model, const std::string& predictions)> evaluate;
};

/// One run of a task: its flags' values and what it does with them. lmkit-finetune and
/// lmkit-evaluate make one of every registered task before parsing (each adds its flags),
/// then use the one --task or --metric names.
class Task {
 public:
  virtual ~Task() = default;
  /// Adds the task's own flags to lmkit-finetune or lmkit-evaluate, bound to the task's
  /// members. Its flag names must be new to the app and to every other task.
  virtual void add_flags(CLI::App& app, Mode mode) = 0;
  /// Checks and fits the flags to the model before any data is read (lengths, layout).
  virtual void prepare_options(const Context& context) { (void)context; }
  /// Reads the training and dev files.
  virtual Prepared prepare(const Context& context, const std::string& train, const std::string& dev) = 0;
  /// finetune.json's keys beyond "task": how the task read its data and decoded.
  virtual Json info() const = 0;
  /// Takes finetune.json's keys (`info`, {} for a checkpoint without one) for every
  /// flag of the task that `app` did not get.
  virtual void use_info(const Json& info, const CLI::App& app) = 0;
  /// lmkit-evaluate: the figures of the finetuned `model` on `data`; writes the
  /// predictions file when `predictions` is not empty.
  virtual Json evaluate(models::Model& model, const Context& context, const std::string& data,
                        const std::string& predictions) = 0;
  /// The dev figure that picks the best epoch (higher is better).
  virtual std::string best_metric() const = 0;
  /// One line of figures, after "best dev (epoch N): ".
  virtual std::string describe(const Json& figures) const = 0;
  /// The name result.json gives the run (the task's, or a variant: "regression").
  virtual std::string result_name() const = 0;
};

/// How a suite file's key becomes a flag (lmkit-suite; docs/suite.md).
enum class KeyValue { kInt, kNumber, kString, kColumn, kBool };
struct SuiteKey {
  std::string key;           ///< the suite file's key: text_column
  std::string flag;          ///< lmkit-finetune's flag: --text-column
  KeyValue value = KeyValue::kString;
  bool test_eval = false;    ///< lmkit-evaluate on the test set takes it too
};
/// A suite task type the task runs ("pair-classification", "regression", ...).
struct SuiteType {
  std::string name;
  std::vector<std::string> metrics;          ///< the figures it may report
  std::vector<std::string> default_metrics;  ///< reported when the suite names none
  std::vector<std::string> flags;            ///< lmkit-finetune flags it always adds (--regression)
  std::vector<std::string> required_keys;    ///< suite keys it needs (text_pair_column)
  bool percentages = false;                  ///< its figures are 0–100 already (BLEU), not fractions
};

/// A registered task.
struct TaskSpec {
  std::string name;                  ///< --task: classification
  std::string summary;               ///< one line for --help
  std::string head;                  ///< the family head it finetunes (models::Family::head): "classification"
  std::string metric;                ///< lmkit-evaluate's --metric for its checkpoints
  std::string predictions;           ///< its predictions file in a run directory: predictions.tsv
  std::vector<SuiteType> suite_types;
  std::vector<SuiteKey> suite_keys;  ///< its suite keys beyond the finetuning ones every task takes
  std::function<std::unique_ptr<Task>()> create;
  std::string source;                ///< "lmkit", or a plugin's path (register_task sets it)
};

/// Every task, lmkit's then those registered, in the order --help lists them.
const std::vector<TaskSpec>& tasks();
/// Adds a task (from a program or a plugin). Its name and its metric must be new (an
/// lmkit-evaluate metric included): InputError naming both registrants otherwise.
void register_task(TaskSpec spec);
/// The task `name`; InputError listing them.
const TaskSpec& task(const std::string& name);
/// The task whose lmkit-evaluate metric is `metric`; nullptr for none.
const TaskSpec* task_with_metric(const std::string& metric);
/// "classification, token-classification or seq2seq".
std::string task_names();

/// The architecture `spec` finetunes of `family`; InputError naming the families that have its head.
std::string head_of(const TaskSpec& spec, const models::Family& family);

/// Writes `dir`/finetune.json: {"task": name, "max_length": ..., the task's info()}.
void save_info(const std::string& dir, const std::string& task, int64_t max_length, const Json& info);
/// `dir`/finetune.json ({} when there is none: HF's and pretrained checkpoints).
/// InputError naming the file for a malformed one, or one another task wrote.
Json read_info(const std::string& dir, const std::string& task);

/// One Task of every registered task, each with the flags it added to an app.
struct TaskFlags {
  std::vector<std::unique_ptr<Task>> instances;  ///< in tasks() order
  std::vector<std::vector<std::string>> flags;   ///< the flags each added
  Mode mode = Mode::kFinetune;
  /// The instance of task `name`.
  Task& of(const std::string& name);
  /// InputError for a flag given on the command line that only other tasks than
  /// `chosen` take ("" for none), unless it is in `allowed`: "--beams applies to --task seq2seq"
  /// (lmkit-evaluate: "to --metric generation").
  void check_given(const CLI::App& app, const std::string& chosen, const std::vector<std::string>& allowed = {}) const;
};
/// Makes every registered task and adds its flags for `mode` to `app` (before parsing).
/// InputError naming both when a task's flag is taken already.
TaskFlags add_task_flags(CLI::App& app, Mode mode);

}  // namespace lmkit::tasks
