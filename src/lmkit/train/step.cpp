#include "lmkit/train/step.h"

#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "lmkit/core/autocast.h"

namespace lmkit::train {

std::unique_ptr<torch::optim::Optimizer> make_adamw(torch::nn::Module& model, const OptimizerOptions& o) {
  std::vector<at::Tensor> decay, no_decay;
  for (auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    (p.value().dim() >= 2 ? decay : no_decay).push_back(p.value());
  }
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(o.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      double clip, bool bf16) {
  StepResult r;
  optimizer.zero_grad();
  const double n = static_cast<double>(batches.size());
  const c10::Device device = batches.front().input_ids.device();
  for (const Batch& b : batches) {
    r.tokens += b.num_tokens();
    at::Tensor loss;
    {
      AutocastGuard autocast(device, bf16);
      loss = model.forward(b).loss;
    }
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
      r.finite = false;
      return r;
    }
    (loss / n).backward();
    r.loss += value / n;
  }
  r.grad_norm = torch::nn::utils::clip_grad_norm_(model.parameters(), clip > 0 ? clip : 1e30);
  if (!std::isfinite(r.grad_norm)) {
    r.finite = false;
    return r;
  }
  optimizer.step();
  return r;
}

}  // namespace lmkit::train
