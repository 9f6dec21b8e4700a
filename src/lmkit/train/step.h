// One optimizer step, shared by lmkit-pretrain's trainer and lmkit-bench, so the
// benchmark measures exactly the training path.
#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/model.h"

namespace lmkit::train {

struct OptimizerOptions {
  double lr = 1e-4, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

/// AdamW (Loshchilov & Hutter) with two groups: weight decay on matrices and
/// embeddings, none on biases and norm weights (1-D parameters).
std::unique_ptr<torch::optim::Optimizer> make_adamw(torch::nn::Module& model, const OptimizerOptions& options);

/// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

struct StepResult {
  double loss = 0;       ///< mean over the micro-batches
  double grad_norm = 0;  ///< before clipping
  int64_t tokens = 0;    ///< real (non-padding) input tokens
  bool finite = true;    ///< false: the update was skipped
};

/// Forward and backward over `batches` (gradient accumulation: the loss of each
/// divided by their number), clip the global norm to `clip` (0: off), and step
/// — unless the loss or the gradient norm is not finite, which skips the update.
/// With `bf16`, the forward pass runs under bf16 autocast (float32 master weights).
StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      double clip, bool bf16);

}  // namespace lmkit::train
