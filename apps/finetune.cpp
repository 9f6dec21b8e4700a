// lmkit-finetune: a registered task (--task; lmkit's: classification and regression,
// token classification, text-to-text generation) from a pretrained checkpoint or from
// random initialisation, with dev evaluation each epoch, early stopping, the best
// checkpoint kept, a predictions file and result.json (tasks/finetune.h).
#include <ATen/ATen.h>

#include "lmkit/core/app.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/dist/start.h"
#include "lmkit/models/family.h"
#include "lmkit/tasks/finetune.h"

using namespace lmkit;

namespace {

// "classification: a label per text ...; seq2seq: ...", from the registry (plugins' tasks included).
std::string task_help() {
  std::string text;
  for (const auto& t : tasks::tasks()) text += (text.empty() ? "" : "; ") + t.name + ": " + t.summary;
  return text;
}

std::vector<std::string> task_choices() {
  std::vector<std::string> names;
  for (const auto& t : tasks::tasks()) names.push_back(t.name);
  return names;
}

// The model, the data and the run directory.
void add_run_flags(CLI::App& app, tasks::FinetuneOptions& a) {
  app.add_option("--checkpoint", a.checkpoint, "pretrained checkpoint directory, lmkit's or HuggingFace's (model_type " + models::family_names() + ")");
  app.add_option("--init", a.init, "'random': no pretraining (with --model and --tokenizer)");
  app.add_option("--model", a.model, "model preset for --init random");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer directory, PATH.model or tokenizer.json (default: the checkpoint's)");
  app.add_option("--task", a.task, task_help())->check(CLI::IsMember(task_choices()));
  app.add_option("--train", a.train, "training file: TSV, CSV, JSONL or Parquet (token classification: CoNLL, JSONL or Parquet)")->required();
  app.add_option("--dev", a.dev, "dev file, same format")->required();
  app.add_option("--output", a.output, "run directory")->required();
  app.add_option("--text-column", a.columns.text, "text column: header name or 0-based index (token classification: "
                 "the JSONL words field, default tokens)");
  app.add_option("--label-column", a.columns.label, "label column: header name or 0-based index (token classification: "
                 "the CoNLL tag column, default the last; or the JSONL tags field, default tags)");
  app.add_option("--format", a.columns.format, "auto (by extension), tsv, csv or jsonl (token classification: conll or jsonl)");
  app.add_flag("--resume", a.resume, "continue the run in OUTPUT from its latest checkpoint (after a stop or a signal)");
  app.add_option("--keep", a.keep,
                 "what a finished run keeps: all (best/, final/, and checkpoints/step-N with the optimizer state, "
                 "to resume from) or best (best/ alone)")
      ->check(CLI::IsMember({"all", "best"}));
  app.add_flag("--overwrite", a.overwrite, "replace the earlier run in OUTPUT (its checkpoints, predictions and results)");
}

}  // namespace

int main(int argc, char** argv) {
  dist::quiet_follower_input_errors();  // a launched job's input errors said once, by rank 0
  // Before the flags are built: a plugin's families and tasks appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-finetune: finetune a checkpoint, or a model from random initialisation, on " + tasks::task_names());
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  tasks::FinetuneOptions a;
  add_run_flags(app, a);
  tasks::TaskFlags task_flags;
  if (const int rc = guard([&] { task_flags = tasks::add_task_flags(app, tasks::Mode::kFinetune); })) return rc;
  tasks::add_training_flags(app, a);
  train::OptimizerFlags optimizer_flags;
  train::add_optimizer_flags(app, optimizer_flags);
  train::add_shard_flag(app, a.parallel);
  add_runtime_flags(app, a.runtime);
  add_tensorboard_flags(app, a.tensorboard);
  dist::add_distributed_flags(app, a.dist);
  add_config_flag(app);
  return run_app(app, argc, argv, [&] {
    task_flags.check_given(app, a.task);
    a.optimizer = train::optimizer_options(app, optimizer_flags, a.lr, a.weight_decay);
    tasks::finetune(a, task_flags.of(a.task), resolved_options(app), &app);
  });
}
