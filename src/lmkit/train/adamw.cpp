#include "lmkit/train/adamw.h"

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lmkit/train/optimizers_builtin.h"

namespace lmkit::train {

bool FusedAdamW::amsgrad() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return true;
  }
  return false;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  const double scale = grad_scale_;
  grad_scale_ = 1.0;
  if (!closure && !amsgrad()) {
    native_step(scale);
    return {};
  }
  if (scale != 1.0) {
    at::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      for (auto& p : group.params()) {
        if (p.grad().defined()) p.grad().mul_(scale);
      }
    }
  }
  return torch::optim::AdamW::step(std::move(closure));
}

void FusedAdamW::native_step(double scale) {
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    // One multi-tensor launch per (device, dtype): every parameter of the group at once.
    std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> params, grads, avgs, sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto key = p.unsafeGetTensorImpl();
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      // The kernel reads the step count from a float tensor on the parameter's device; keep one
      // per parameter beside the integer count the checkpoint format holds.
      at::Tensor& step = device_steps_[key];
      if (!step.defined() || step.device() != p.device()) {
        step = at::full({}, static_cast<double>(st.step()), p.options().dtype(at::kFloat));
      }
      st.step(st.step() + 1);
      const auto bucket = std::make_pair(p.device().str(), p.scalar_type());
      params[bucket].push_back(p);
      grads[bucket].push_back(p.grad());
      avgs[bucket].push_back(st.exp_avg());
      sqs[bucket].push_back(st.exp_avg_sq());
      steps[bucket].push_back(step);
    }
    for (auto& [bucket, ps] : params) {
      at::_foreach_add_(steps[bucket], 1);
      std::optional<at::Tensor> grad_scale;  // the kernel divides the gradients by it
      if (scale != 1.0) grad_scale = at::full({}, 1.0 / scale, ps.front().options().dtype(at::kFloat));
      at::_fused_adamw_(ps, grads[bucket], avgs[bucket], sqs[bucket], {}, steps[bucket], o.lr(),
                        std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                        /*amsgrad=*/false, /*maximize=*/false, grad_scale, /*found_inf=*/{});
    }
  }
}

OptimizerSpec adamw_optimizer() {
  OptimizerSpec spec;
  spec.name = "adamw";
  spec.summary = "AdamW (Loshchilov & Hutter 2019; LibTorch's fused multi-tensor update)";
  spec.shardable = true;
  spec.create = [](const ModelParameters& params, const OptimizerOptions& o) -> std::unique_ptr<torch::optim::Optimizer> {
    std::vector<at::Tensor> all;
    for (const auto& [name, p] : params.named) all.push_back(p);
    auto groups = decay_groups(all, o.weight_decay, [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
    });
    return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(o.lr));
  };
  return spec;
}

}  // namespace lmkit::train
