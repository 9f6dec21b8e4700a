#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include "lmkit/train/step.h"

using namespace lmkit;

namespace {

// Two identical small models, one trained by torch::optim::AdamW, one by FusedAdamW.
torch::nn::Sequential tiny_model() {
  return torch::nn::Sequential(torch::nn::Linear(7, 13), torch::nn::Linear(13, 3));
}

void copy_weights(torch::nn::Sequential& from, torch::nn::Sequential& to) {
  at::NoGradGuard no_grad;
  auto a = from->parameters(), b = to->parameters();
  for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
}

}  // namespace

TEST_CASE("FusedAdamW: the same updates as torch::optim::AdamW, with weight decay and a gradient scale",
          "[train][optimizer]") {
  at::manual_seed(2);
  auto reference = tiny_model(), fused = tiny_model();
  copy_weights(reference, fused);
  auto options = torch::optim::AdamWOptions(3e-2).betas({0.9, 0.98}).eps(1e-6).weight_decay(0.1);
  torch::optim::AdamW ref_opt(reference->parameters(), options);
  train::FusedAdamW fused_opt(fused->parameters(), options);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor x = at::randn({16, 7});
    const double scale = step % 2 == 0 ? 1.0 : 0.37;
    for (auto* m : {&reference, &fused}) {
      (*m)->zero_grad();
      (*m)->forward(x).pow(2).mean().backward();
    }
    {
      at::NoGradGuard no_grad;
      for (auto& p : reference->parameters()) p.grad().mul_(scale);
    }
    fused_opt.set_grad_scale(scale);
    ref_opt.step();
    fused_opt.step();
  }
  auto a = reference->parameters(), b = fused->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].sub(b[i]).abs().max().item<double>() < 1e-6);
  }
  // Same state, so checkpoints are interchangeable.
  const auto& state = fused_opt.state();
  REQUIRE(state.size() == a.size());
  for (const auto& entry : state) {
    CHECK(static_cast<const torch::optim::AdamWParamState&>(*entry.second).step() == 5);
  }
}

TEST_CASE("FusedAdamW: falls back to torch::optim::AdamW for amsgrad, and the scale still applies",
          "[train][optimizer]") {
  at::manual_seed(4);
  auto reference = tiny_model(), fused = tiny_model();
  copy_weights(reference, fused);
  auto options = torch::optim::AdamWOptions(1e-2).amsgrad(true);
  torch::optim::AdamW ref_opt(reference->parameters(), options);
  train::FusedAdamW fused_opt(fused->parameters(), options);
  const at::Tensor x = at::randn({4, 7});
  for (auto* m : {&reference, &fused}) (*m)->forward(x).sum().backward();
  {
    at::NoGradGuard no_grad;
    for (auto& p : reference->parameters()) p.grad().mul_(0.5);
  }
  fused_opt.set_grad_scale(0.5);
  ref_opt.step();
  fused_opt.step();
  auto a = reference->parameters(), b = fused->parameters();
  for (size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
}
