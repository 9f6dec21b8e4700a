// Parameters that are still arriving when a forward pass starts: a sharded optimizer's
// all-gather of the other ranks' updated chunks (train/sharded.h) runs while the next forward
// does, and each layer waits only for the buckets holding its own parameters, as Megatron-LM's
// distributed optimizer does with a hook before each layer (--overlap-param-gather).
// LibTorch's C++ modules have no forward pre-hooks, so the models' layer stacks call
// before_layer() themselves; without a gate installed on this thread it does nothing.
#pragma once

#include <vector>

namespace torch::nn {
class Module;
}

namespace lmkit::nn {

/// A layer whose stack calls before_layer() before running it (nn::TransformerLayer through
/// models::run_layers, Llama's layers): a second base of its module class.
class GatedLayer {
 public:
  virtual ~GatedLayer() = default;
};

/// Every GatedLayer among `model`'s modules (ShardedOptimizer::overlap_gather).
std::vector<const torch::nn::Module*> gated_layers(const torch::nn::Module& model);

class LayerGate {
 public:
  virtual ~LayerGate() = default;
  /// Returns once every parameter of `layer` (and of its submodules) holds its current value.
  virtual void before_layer(const torch::nn::Module& layer) = 0;
};

/// The models' layer stacks call this before each layer runs (not in a recomputed replay).
void before_layer(const torch::nn::Module& layer);

/// Installs `gate` for this thread's forward passes while it lives (nullptr: none), then puts
/// back the one before.
class LayerGateScope {
 public:
  explicit LayerGateScope(LayerGate* gate);
  ~LayerGateScope();
  LayerGateScope(const LayerGateScope&) = delete;
  LayerGateScope& operator=(const LayerGateScope&) = delete;

 private:
  LayerGate* before_;
};

}  // namespace lmkit::nn
