// lmkit-finetune's run, as a library call: any registered task's head on a pretrained
// body (or at random), trained with dev evaluation each epoch, the best epoch kept in
// OUTPUT/best with its tokenizer, label map and finetune.json, its dev predictions, and
// OUTPUT/result.json.
#pragma once

#include <string>

#include "lmkit/core/app.h"
#include "lmkit/dist/start.h"
#include "lmkit/tasks/task.h"
#include "lmkit/train/optimizer.h"

namespace lmkit::tasks {

/// lmkit-finetune's flags that every task shares.
struct FinetuneOptions {
  RuntimeOptions runtime;
  TensorBoardFlags tensorboard;
  dist::GroupOptions dist;
  std::string task = "classification";
  std::string checkpoint;  ///< the pretrained checkpoint; or
  std::string init;        ///< "random", with `model` (a preset) and `tokenizer`
  std::string model, tokenizer, train, dev, output, dtype = "fp32";
  data::ColumnSpec columns;  ///< --text-column, --label-column, --format
  int64_t epochs = 3, batch_size = 32, max_length = 128, patience = 0, max_train_examples = 0;
  int64_t max_dev_examples = 0;  ///< evaluate on the dev file's first N examples (0: all)
  int64_t accumulation = 1;      ///< batches per optimizer step (an epoch's last step takes what is left)
  bool recompute = false;        ///< each layer's activations recomputed in backward
  /// What a finished run keeps: "all" (best/, final/ and checkpoints/step-N, the one with the
  /// optimizer state) or "best" (best/ alone: final/ and checkpoints/ go once it is finished).
  std::string keep = "all";
  double lr = 5e-5, weight_decay = 0.01, warmup_ratio = 0.1, clip = 1.0;
  train::OptimizerOptions optimizer;  ///< --optimizer and its flags (lr and weight_decay: the fields above)
  train::ParallelFlags parallel;      ///< --shard-optimizer, --bucket-mb, --overlap-param-gather (data parallelism)
  bool resume = false, overwrite = false;
};

/// The optimisation flags of lmkit-finetune (--epochs, --lr, --batch-size, --max-length, ...) with their
/// range checks; lmkit-suite checks a suite's values through them when it reads the file.
void add_training_flags(CLI::App& app, FinetuneOptions& a);

/// Finetunes `task` (the instance whose flags were parsed). `resolved` is the run's
/// flags (OUTPUT/config.json; --resume checks them), `app` says which flags were given.
/// Prints the best dev figures on rank 0 and returns result.json's content ({} elsewhere).
Json finetune(const FinetuneOptions& options, Task& task, const Json& resolved, const CLI::App* app = nullptr);

}  // namespace lmkit::tasks
