// The training loop, for any model: a registered optimizer (AdamW by default), LR schedule,
// gradient accumulation and clipping, a guard against non-finite steps,
// periodic validation, and atomic checkpoints that resume exactly.
#pragma once

#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/data/loader.h"
#include "lmkit/dist/group.h"
#include "lmkit/dist/reducer.h"
#include "lmkit/models/model.h"
#include "lmkit/train/generators.h"
#include "lmkit/train/schedule.h"
#include "lmkit/train/step.h"

namespace lmkit::train {

struct TrainerOptions {
  int64_t steps = 1000;         ///< optimizer steps
  ScheduleOptions schedule;     ///< lr, warmup, schedule (total_steps is set to `steps`)
  /// The optimizer (its lr is the schedule's: schedule.lr); weight decay never on biases and norm weights.
  OptimizerOptions optimizer;
  double clip = 1.0;            ///< global gradient-norm clip (0: off)
  bool bf16 = false;            ///< bf16 autocast for the forward pass (float32 master weights)
  bool bf16_weights = false;    ///< bf16 weights in the step, float32 masters (train::Precision::kBf16Weights)
  /// Under data parallelism: the ZeRO stage (0: none; 1: optimizer state sharded; 2: gradients
  /// too: train/sharded.h), the gradient reducer's bucket size, the all-gather's overlap.
  ParallelFlags parallel;
  /// Each layer's activations recomputed in backward instead of kept (nn::recompute).
  bool recompute = false;
  int64_t accumulation = 1;     ///< batches per optimizer step
  /// A step's batches end with the loader's epoch (finetuning: each epoch is ceil(batches /
  /// accumulation) steps, its last one shorter), instead of running on into the next epoch.
  bool accumulate_within_epoch = false;
  int64_t log_every = 10;       ///< train lines in metrics.jsonl
  int64_t eval_every = 0;       ///< validation interval in steps (0: only at the end)
  int64_t eval_batches = 0;     ///< validation batches (0: the whole split)
  bool eval_accuracy = false;   ///< validation also reports the accuracy over labelled positions (a token classifier's)
  int64_t save_every = 0;       ///< checkpoint interval in steps (0: only at the end)
  int64_t keep_last = 2;        ///< step checkpoints kept (the best is kept apart)
  int64_t max_bad_steps = 10;   ///< consecutive non-finite steps before giving up
  bool resume = false;          ///< continue from checkpoints/latest
  /// With resume: continue although the training examples differ from the checkpoint's
  /// (data::fingerprint; a warning instead of the error).
  bool allow_changes = false;
  int64_t stop_at = 0;          ///< stop after this step as if interrupted (0: run to `steps`)
  std::string output;           ///< the run directory
  std::string tensorboard;      ///< where TensorBoard event files go ("": none); rank 0 writes them
  /// Data-parallel training (nullptr: one process): identical initial weights
  /// (rank 0's), each rank its share of every batch, gradients summed over ranks
  /// while backward runs, and only rank 0 logs and writes checkpoints.
  std::shared_ptr<dist::Group> group;
  /// Validation: evaluate_loss on the validation set unless this is given (finetuning's metrics).
  std::function<Json(models::Model&)> evaluator;
  std::string best_metric = "loss";  ///< the validation field that picks the best checkpoint
  bool higher_is_better = false;     ///< e.g. accuracy
  int64_t patience = 0;              ///< stop after this many validations without improvement (0: never)
  std::string best_dir;              ///< where the best checkpoint goes (default OUTPUT/checkpoints/best)
  /// Whether the best checkpoint and final/ carry the optimizer state (2× the weights for
  /// AdamW). A run resumes from checkpoints/step-N, which always do: finetuning leaves it out.
  bool optimizer_in_exports = true;
};

/// A run's checkpoints/ folder: the step-N checkpoints, the `latest` pointer and rotation.
class CheckpointDir {
 public:
  explicit CheckpointDir(const std::string& run_dir) : dir_(run_dir + "/checkpoints") {}
  const std::string& path() const { return dir_; }
  std::string step_path(int64_t step) const { return dir_ + "/step-" + std::to_string(step); }
  /// Whether `dir` holds every file of a checkpoint.
  static bool complete(const std::string& dir);
  /// The checkpoint `latest` names, or "" when there is none; a `latest` that is damaged or
  /// names a missing or incomplete checkpoint is an InputError.
  std::string latest() const;
  /// Writes step-N through `write(dir)` (save_pretrained's atomic directory), then points `latest` at it.
  void save(int64_t step, const std::function<void(const std::string&)>& write) const;
  /// Removes all but the newest `keep` step checkpoints (at least one).
  void rotate(int64_t keep) const;

 private:
  std::string dir_;
};

/// What a Trainer trains: the model, its data and the device (TrainerOptions says how).
struct TrainerInputs {
  std::shared_ptr<models::Model> model;
  std::shared_ptr<const data::Dataset> train;  ///< examples (data::objective(name).dataset(...), a task's set)
  data::LoaderOptions loader;                   ///< batch size, padding id, shuffling of `train`
  /// Validation examples (nullptr: none; TrainerOptions::evaluator, when given, validates instead).
  std::shared_ptr<const data::Dataset> valid;
  std::optional<data::LoaderOptions> valid_loader;  ///< batches of `valid` (default: `loader`'s)
  /// Validation sets by source (a mixture's, instead of `valid`): each evaluated on its own
  /// (up to eval_batches each), reported under "sources" with the loss pooled over their targets.
  std::vector<std::pair<std::string, std::shared_ptr<const data::Dataset>>> valid_sources;
  c10::Device device = c10::kCPU;                    ///< init_runtime's
  /// Adds files to every checkpoint the run writes (step-N, best, final/) beside the weights
  /// and config.json. Only through it does a checkpoint hold its tokenizer — pass
  /// `[&](const std::string& dir) { tokenizer.save(dir); }` so that it loads on its own.
  std::function<void(const std::string&)> save_extra;
  /// Called by the writer once the resumed checkpoint has loaded (at once on a fresh run), before
  /// the first step: Run::record_config's write of config.json, so that a resume that fails
  /// (a damaged checkpoint) leaves the run's config.json as it was.
  std::function<void()> on_restored;
};

/// The options' own checks — steps and accumulation at least 1, the data-parallel flags
/// (check_parallel_flags) — made by Trainer, and by the apps before any data is read.
void check_trainer_options(const TrainerOptions& options);

class Trainer {
 public:
  /// Moves the model to the device and makes its optimizer. `options.output` must be a
  /// directory open_run_directory opened, and its lock held until run() returns.
  Trainer(TrainerInputs inputs, TrainerOptions options);

  /// Trains to options.steps (from the latest checkpoint with resume), writes
  /// metrics.jsonl, checkpoints/step-N, checkpoints/latest, checkpoints/best and
  /// final/; returns the summary (also in result.json).
  Json run();

  /// The step a resumed run continues from (0 for a fresh one).
  int64_t start_step() const { return start_step_; }

 private:
  struct Loop;  // the state of one run(): loader, metrics file, progress, timing (trainer.cpp)

  // run()'s steps, in order.
  data::LoaderPosition resume();                 ///< restores checkpoints/latest; every rank must agree on the step
  std::optional<Json> finished_summary() const;  ///< a finished run's result.json (resuming it changes nothing)
  void train_one(Loop& loop);                    ///< one optimizer step, or one skipped (non-finite: no update)
  void log(Loop& loop, const StepResult& result, double lr);
  bool validate_and_keep_best(Loop& loop);       ///< true when early stopping ends the run
  bool validate_or_defer(Loop& loop);            ///< validate_and_keep_best; a stop signal leaves it pending
  bool validate_pending(Loop& loop);             ///< a resumed run's pending validation, then its checkpoint again
  void save_step(Loop& loop);                    ///< checkpoints/step-N, latest, rotation
  Json stop_interrupted(Loop& loop);             ///< --stop-at or a signal: checkpoint, no final/
  Json finish(Loop& loop);                       ///< final/ and result.json
  void add_draws(Json& summary, const Loop& loop) const;  ///< a mixture's samples and epochs of each source
  void report_memory() const;                    ///< data-parallel: each rank's optimizer state and peak memory, to stderr

  /// `optimizer`: with optimizer.pt (a step checkpoint, or an export when optimizer_in_exports).
  void save_checkpoint(int64_t step, const data::LoaderPosition& position, const std::string& dir,
                       const GeneratorStates& generators, bool optimizer = true);
  /// Every rank's generator states and, with a sharded optimizer, its state gathered whole for
  /// saving: a collective under data parallelism, called by every rank before a checkpoint.
  GeneratorStates generators() const;
  data::LoaderPosition restore(const std::string& dir);
  /// InputError (a warning with allow_changes) when the training examples are not the ones whose
  /// fingerprint the checkpoint saved (`saved`, from `state_file`; empty: an older checkpoint).
  void check_same_data(const std::string& saved, const std::string& state_file) const;
  Json validate(int64_t step);
  Json validate_sources(int64_t max_batches);  ///< each of valid_sources_ and their pooled loss
  bool writer() const { return !o_.group || o_.group->leader(); }
  /// A sharded optimizer's all-gather that overlaps the next forward (--overlap-param-gather)
  /// finished: before anything else reads the parameters (validation, the end; checkpoints
  /// through generators()). Every rank: it may launch the gather.
  void parameters_ready() const;

  std::shared_ptr<models::Model> model_;
  TrainerOptions o_;
  std::shared_ptr<const data::Dataset> train_, valid_;
  std::string train_fingerprint_;  // data::fingerprint of train_, taken once at construction
  std::vector<std::pair<std::string, std::shared_ptr<const data::Dataset>>> valid_sources_;
  data::LoaderOptions train_loader_, valid_loader_;
  c10::Device device_;
  std::function<void(const std::string&)> save_extra_;
  std::function<void()> on_restored_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  int64_t start_step_ = 0;
  double best_valid_ = std::numeric_limits<double>::quiet_NaN();  // NaN: none yet
  int64_t skipped_steps_ = 0;
  int64_t best_step_ = 0, evals_since_best_ = 0;
  bool early_stopped_ = false;
  bool validation_pending_ = false;  // a stop signal interrupted the validation of the checkpoint's step
};

/// Opens a run directory for a training run and returns its lock (docs/training.md,
/// Guarantees): a new or empty directory starts a run; one that holds an earlier
/// lmkit run (its .lock) is continued with `resume`, or emptied of that run's
/// outputs with `overwrite` once the lock is held, and refused otherwise; a
/// directory holding files lmkit did not write is refused whatever the flags; a
/// directory another process runs in is a RuntimeError (RunLock).
/// `also_ours` names further files the app writes there (the finetuning tasks' predictions files).
/// A directory the run made is removed again if the run ends with nothing written there (RunLock).
std::unique_ptr<RunLock> open_run_directory(const std::string& dir, bool resume, bool overwrite,
                                            const std::vector<std::string>& also_ours = {});

/// --resume continues the run its directory holds: a flag that defines the data, the
/// model or the optimisation (`now`, the resolved options) must be what it was
/// (OUTPUT/config.json), unless `allow_changes` (then the changes go to stderr);
/// `steps` may not be below the step the run has reached.
void check_resumed_flags(const std::string& output, const Json& now, int64_t steps, bool allow_changes);

/// The newest complete checkpoint of a run directory named by checkpoints/latest,
/// or "" when there is none; a `latest` naming a missing or incomplete checkpoint is an InputError.
std::string latest_checkpoint(const std::string& run_dir);

/// The step a checkpoint directory holds (its trainer_state.json); InputError when that file is damaged.
int64_t checkpoint_step(const std::string& checkpoint_dir);

}  // namespace lmkit::train
