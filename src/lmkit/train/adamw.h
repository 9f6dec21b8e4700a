// AdamW, lmkit's default optimizer (--optimizer adamw): torch::optim::AdamW's state and
// checkpoint format, updated by LibTorch's multi-tensor fused kernel.
#pragma once

#include <unordered_map>

#include <torch/optim/adamw.h>

#include "lmkit/train/optimizer.h"

namespace lmkit::train {

/// torch::optim::AdamW whose update is LibTorch's multi-tensor at::_fused_adamw_
/// (one pass over every parameter of a group, CPU or CUDA) instead of eight tensor
/// operations per parameter, with an optional gradient scale (the clipping
/// coefficient) folded into that pass. Same state and checkpoint format as
/// torch::optim::AdamW; falls back to it for amsgrad and closures.
/// (lmkit's own vectorized CPU pass was 6-8% slower than the native kernel on
/// LibTorch 2.11: bench/levers.sh, docs/benchmarks.md.)
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  /// Multiplies every gradient by `scale` in the next step() (then resets to 1).
  void set_grad_scale(double scale) { grad_scale_ = scale; }
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  bool amsgrad() const;
  void native_step(double scale);
  double grad_scale_ = 1.0;
  std::unordered_map<void*, at::Tensor> device_steps_;  ///< per parameter: its step count on its device
};

}  // namespace lmkit::train
