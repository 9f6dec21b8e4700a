#include "lmkit/train/step.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <string>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "lmkit/core/autocast.h"
#include "lmkit/core/runtime.h"
#include "lmkit/core/simd.h"

namespace lmkit::train {

namespace {

// One AdamW update of n float32 elements, in torch::optim::AdamW's order of operations:
//   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;  p += -(lr/bc1) · m / (√v/√bc2 + ε)
struct AdamWStep {
  float decay, beta1, beta2, one_minus_beta1, one_minus_beta2, sqrt_bc2, eps, step_size, grad_scale;
  bool weight_decay;
};

LMKIT_MULTIVERSION void adamw_range(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float grad = g[i] * s.grad_scale;
    const float param = s.weight_decay ? p[i] * s.decay : p[i];
    const float mi = m[i] * s.beta1 + grad * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + grad * grad * s.one_minus_beta2;
    const float denom = std::sqrt(vi) / s.sqrt_bc2 + s.eps;
    p[i] = param + -s.step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  at::parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    adamw_range(p + begin, g + begin, m + begin, v + begin, end - begin, s);
  });
}

// The optimizer state's key for a parameter, as torch::optim::AdamW keeps it.
void* state_key(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

bool FusedAdamW::native_kernel_from_env() { return lever_disabled("adamw"); }

bool FusedAdamW::amsgrad() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return true;
  }
  return false;
}

bool FusedAdamW::fusable() const {
  if (native_) return false;
  for (const auto& group : param_groups_) {
    for (const auto& p : group.params()) {
      const at::Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (!p.device().is_cpu() || p.scalar_type() != at::kFloat || !p.is_contiguous()) return false;
      if (g.is_sparse() || g.scalar_type() != at::kFloat || !g.is_contiguous()) return false;
    }
  }
  return true;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  const double scale = grad_scale_;
  grad_scale_ = 1.0;
  if (!closure && !amsgrad() && !fusable()) {
    native_step(scale);
    return {};
  }
  if (closure || amsgrad()) {
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
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto key = state_key(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Contiguous));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Contiguous));
        it = state_.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      st.step(st.step() + 1);
      const double bc1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double bc2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      const AdamWStep s{static_cast<float>(1 - o.lr() * o.weight_decay()),
                        static_cast<float>(beta1),
                        static_cast<float>(beta2),
                        static_cast<float>(1 - beta1),
                        static_cast<float>(1 - beta2),
                        static_cast<float>(std::sqrt(bc2)),
                        static_cast<float>(o.eps()),
                        static_cast<float>(o.lr() / bc1),
                        static_cast<float>(scale),
                        o.weight_decay() != 0};
      at::Tensor m = st.exp_avg().contiguous(), v = st.exp_avg_sq().contiguous();
      if (!m.is_same(st.exp_avg())) st.exp_avg(m);  // a loaded state may be strided
      if (!v.is_same(st.exp_avg_sq())) st.exp_avg_sq(v);
      adamw_kernel(p.data_ptr<float>(), p.grad().data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(),
                   p.numel(), s);
    }
  }
  return {};
}

void FusedAdamW::native_step(double scale) {
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    // One multi-tensor launch per (device, dtype): every parameter of the group at once.
    std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> params, grads, avgs, sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto key = state_key(p);
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
  return std::make_unique<FusedAdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& g : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      double clip, bool bf16) {
  StepResult r;
  auto t0 = std::chrono::steady_clock::now();
  model.zero_grad(/*set_to_none=*/true);  // backward then hands its buffers over: no zeroing, no add
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
    r.forward_ms += elapsed_ms(t0);
    if (!std::isfinite(value)) {
      r.finite = false;
      return r;
    }
    t0 = std::chrono::steady_clock::now();
    (loss / n).backward();
    r.backward_ms += elapsed_ms(t0);
    t0 = std::chrono::steady_clock::now();
    r.loss += value / n;
  }
  // Global gradient norm (one read pass); the clipping multiply goes into the update.
  std::vector<at::Tensor> norms;
  for (const auto& p : model.parameters()) {
    if (p.grad().defined()) norms.push_back(p.grad().norm());
  }
  r.grad_norm = norms.empty() ? 0.0 : at::stack(norms).norm().item<double>();
  if (!std::isfinite(r.grad_norm)) {
    r.finite = false;
    return r;
  }
  const double coef = clip > 0 ? clip / (r.grad_norm + 1e-6) : 1.0;  // as torch::nn::utils::clip_grad_norm_
  if (coef < 1.0) {
    if (auto* fused = dynamic_cast<FusedAdamW*>(&optimizer)) {
      fused->set_grad_scale(coef);
    } else {
      at::NoGradGuard no_grad;
      for (auto& p : model.parameters()) {
        if (p.grad().defined()) p.grad().mul_(coef);
      }
    }
  }
  optimizer.step();
  r.update_ms = elapsed_ms(t0);
  return r;
}

}  // namespace lmkit::train
