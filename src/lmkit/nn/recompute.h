// Activation recomputation (Chen et al. 2016, "Training Deep Nets with Sublinear Memory
// Cost"; Megatron-LM's full recomputation): a block runs without keeping its activations,
// and backward runs it again from its saved inputs before backpropagating through it.
// The generators (CPU, and the inputs' CUDA device) are put back to their states before the
// first run, so dropout draws the same masks and the gradients equal the stored path's.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace lmkit::nn {

using RecomputedFn = std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>;

/// fn(inputs), keeping only `inputs` for backward (undefined ones are passed on as they
/// are). Gradients reach the inputs that require them and every parameter fn uses
/// (accumulated into .grad, as backward does). Under no-grad mode it is fn(inputs).
at::Tensor recompute(const RecomputedFn& fn, const std::vector<at::Tensor>& inputs);

/// Whether the models' layer stacks recompute (train::TrainerOptions::recompute sets it for
/// a run; lmkit-pretrain and lmkit-bench --recompute). Off by default.
bool recompute_layers();
/// Sets recompute_layers() while it lives, then puts the earlier setting back.
class RecomputeScope {
 public:
  explicit RecomputeScope(bool on);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool before_;
};

}  // namespace lmkit::nn
