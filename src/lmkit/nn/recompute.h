// Activation recomputation (Chen et al. 2016, "Training Deep Nets with Sublinear Memory
// Cost"; Megatron-LM's full recomputation): a block runs without keeping its activations,
// and backward runs it again from its saved inputs before backpropagating through it.
// The generators (CPU, and the inputs' CUDA device) are put back to their states before the
// first run, so dropout draws the same masks and the gradients equal the stored path's.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace torch::nn {
class Module;
}

namespace lmkit::nn {

using RecomputedFn = std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>;

/// fn(inputs), keeping only `inputs` for backward (undefined ones are passed on as they
/// are). Gradients reach the inputs that require them and every parameter fn uses. The
/// `parameters` fn uses (block_parameters: its own and those it shares with other blocks) get
/// theirs through this node, as inputs of the graph: each reaches its .grad once per backward,
/// summed with its other uses first, as without recomputation — so a data-parallel reducer's
/// hooks see one gradient a parameter. A parameter fn uses that is not listed is found in the
/// recomputed graph and its gradient added to .grad directly (no hook sees it): in one process
/// that is the same sum; under recompute_parameters_listed() (data parallelism) it is a
/// RuntimeError naming its shape. Under no-grad mode it is fn(inputs).
at::Tensor recompute(const RecomputedFn& fn, const std::vector<at::Tensor>& inputs,
                     const std::vector<at::Tensor>& parameters = {});

/// The trainable parameters of `block` and the tensors of `shared` it may use with other blocks
/// (Linformer's layerwise projection), each once: recompute()'s `parameters` for a layer.
std::vector<at::Tensor> block_parameters(const torch::nn::Module& block, const std::vector<at::Tensor>& shared = {});

/// Whether the models' layer stacks recompute (train::TrainerOptions::recompute sets it for
/// a run; lmkit-pretrain and lmkit-bench --recompute). Off by default.
bool recompute_layers();
/// Whether a parameter a recomputed block uses must be one of its `parameters` (the trainer sets
/// it under data parallelism, whose reducer must see each gradient through its hooks).
bool recompute_parameters_listed();
/// Sets recompute_layers() (and recompute_parameters_listed()) while it lives, then puts the
/// earlier settings back.
class RecomputeScope {
 public:
  explicit RecomputeScope(bool on, bool parameters_listed = false);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool before_, listed_before_;
};

}  // namespace lmkit::nn
