// Eval mode for a scope: dropout off while measuring, the module's own mode back
// afterwards, also when the measurement throws.
#pragma once

#include <torch/nn/module.h>

namespace lmkit::nn {

class EvalMode {
 public:
  explicit EvalMode(torch::nn::Module& module) : module_(module), was_training_(module.is_training()) { module.eval(); }
  ~EvalMode() { module_.train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

}  // namespace lmkit::nn
