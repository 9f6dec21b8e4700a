// Adafactor (Shazeer & Stern 2018), T5's optimizer: second moments of a matrix kept as a row
// and a column average (factored), a decay of 1 - t^-0.8, the update clipped to an RMS of at
// most `clip_threshold`, its size relative to the parameter's RMS, and no first moment unless
// asked for. Step by step the computation of HF's transformers.optimization.Adafactor (the
// same operations in the same order; tests/interop/optimizer_parity.py checks 20 steps), with
// lmkit's schedule giving the rate unless --adafactor-relative-step.
#include <ATen/ATen.h>

#include <cmath>
#include <optional>

#include "lmkit/core/error.h"
#include "lmkit/train/optimizers_builtin.h"

namespace lmkit::train {

namespace {

struct AdafactorSettings {
  bool relative_step = false, scale_parameter = true, warmup_init = false;
  double clip_threshold = 1.0, decay_rate = -0.8, beta1 = 0, eps1 = 1e-30, eps2 = 1e-3;
};

// A tensor's root mean square, as HF's _rms: its 2-norm over the square root of its size.
at::Tensor rms(const at::Tensor& t) { return t.norm(2) / std::sqrt(static_cast<double>(t.numel())); }

// The step's rate, as HF's _get_lr: the group's (or the relative step min(1e-2, t^-1/2)), times
// max(eps2, RMS(p)) with scale_parameter. A float32 tensor when it is scaled by the RMS (HF
// multiplies the tensor), a double otherwise, so the products below round as HF's do.
struct Rate {
  std::optional<at::Tensor> tensor;
  double value = 0;
  void scale(at::Tensor& t) const { tensor ? t.mul_(*tensor) : t.mul_(value); }
  double times(double x) const { return tensor ? (*tensor * x).item<double>() : value * x; }
};

Rate step_rate(const AdafactorSettings& s, double group_lr, int64_t step, const at::Tensor& param) {
  double relative = group_lr;
  if (s.relative_step) {
    const double min_step = s.warmup_init ? 1e-6 * static_cast<double>(step) : 1e-2;
    relative = std::min(min_step, 1.0 / std::sqrt(static_cast<double>(step)));
  }
  Rate rate;
  if (!s.scale_parameter) {
    rate.value = relative;
    return rate;
  }
  const at::Tensor param_rms = rms(param);
  if (param_rms.item<double>() > s.eps2) {  // Python's max(eps2, RMS): the RMS tensor when larger
    rate.tensor = param_rms * relative;
  } else {
    rate.value = s.eps2 * relative;
  }
  return rate;
}

// The update before its rate: the gradient over the root of the (factored) second moment.
at::Tensor scaled_gradient(const AdafactorSettings& s, TensorState& st, const at::Tensor& grad, double beta2t) {
  at::Tensor update = grad.pow(2) + s.eps1;
  if (grad.dim() >= 2) {
    at::Tensor& row = st.tensors["exp_avg_sq_row"];  // (..., rows)
    at::Tensor& col = st.tensors["exp_avg_sq_col"];  // (..., cols)
    row.mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
    col.mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
    const at::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
    const at::Tensor c_factor = col.unsqueeze(-2).rsqrt();
    return at::mul(r_factor, c_factor).mul_(grad);
  }
  at::Tensor& v = st.tensors["exp_avg_sq"];
  v.mul_(beta2t).add_(update, 1.0 - beta2t);
  return v.rsqrt().mul_(grad);
}

class Adafactor : public StatefulOptimizer {
 public:
  Adafactor(std::vector<torch::optim::OptimizerParamGroup> groups, AdafactorSettings s)
      : StatefulOptimizer(std::move(groups), std::make_unique<GroupOptions>()), s_(s) {}


 protected:
  void update(at::Tensor& p, const at::Tensor& half_or_float, const GroupOptions& o) override {
    const at::Tensor grad = half_or_float.to(at::kFloat);  // as HF's: the moments in float32
    bool fresh = false;
    TensorState& st = state_of(p, &fresh);
    if (fresh) {
      if (s_.beta1 > 0) st.tensors["exp_avg"] = at::zeros_like(grad);
      if (grad.dim() >= 2) {
        auto rows = grad.sizes().vec(), cols = grad.sizes().vec();
        rows.pop_back();
        cols.erase(cols.end() - 2);
        st.tensors["exp_avg_sq_row"] = at::zeros(rows, grad.options());
        st.tensors["exp_avg_sq_col"] = at::zeros(cols, grad.options());
      } else {
        st.tensors["exp_avg_sq"] = at::zeros_like(grad);
      }
    }
    st.step += 1;
    const Rate rate = step_rate(s_, o.get_lr(), st.step, p);
    const double beta2t = 1.0 - std::pow(static_cast<double>(st.step), s_.decay_rate);
    at::Tensor update = scaled_gradient(s_, st, grad, beta2t);
    update.div_((rms(update) / s_.clip_threshold).clamp_(1.0));
    rate.scale(update);
    if (s_.beta1 > 0) {
      update = st.tensors["exp_avg"].mul_(s_.beta1).add_(update, 1 - s_.beta1);
    }
    if (o.weight_decay() != 0) p.add_(p, rate.times(-o.weight_decay()));
    p.add_(-update);
  }

 private:
  AdafactorSettings s_;
};

AdafactorSettings adafactor_settings(const OptimizerOptions& o) {
  AdafactorSettings s;
  s.relative_step = o.own.at("adafactor-relative-step").get<bool>();
  s.scale_parameter = o.own.at("adafactor-scale-parameter").get<bool>();
  s.warmup_init = o.own.at("adafactor-warmup-init").get<bool>();
  s.clip_threshold = o.own.at("adafactor-clip-threshold").get<double>();
  s.decay_rate = o.own.at("adafactor-decay-rate").get<double>();
  s.beta1 = o.own.at("adafactor-beta1").get<double>();
  s.eps1 = o.own.at("adafactor-eps1").get<double>();
  s.eps2 = o.own.at("adafactor-eps2").get<double>();
  check_input(!s.warmup_init || s.relative_step, "--adafactor-warmup-init needs --adafactor-relative-step true");
  check_input(s.clip_threshold > 0, "--adafactor-clip-threshold must be above 0");
  check_input(s.decay_rate < 0, "--adafactor-decay-rate must be below 0 (the paper's -0.8: beta2 = 1 - t^-0.8)");
  check_input(s.beta1 >= 0 && s.beta1 < 1, "--adafactor-beta1 must be in [0, 1) (0: no first moment)");
  check_input(s.eps1 > 0 && s.eps2 > 0, "--adafactor-eps1 and --adafactor-eps2 must be above 0");
  return s;
}

}  // namespace

OptimizerSpec adafactor_optimizer() {
  OptimizerSpec spec;
  spec.name = "adafactor";
  spec.summary = "Adafactor (Shazeer & Stern 2018): factored second moments; equal to HF's transformers Adafactor";
  spec.adam_flags = false;
  spec.flags = {
      {"adafactor-relative-step", false, "the rate min(1e-2, 1/sqrt(step)) instead of --lr and --schedule", {}},
      {"adafactor-scale-parameter", true, "scale the rate by each parameter's RMS (at least --adafactor-eps2)", {}},
      {"adafactor-warmup-init", false, "with the relative step: min(1e-6 step, 1/sqrt(step))", {}},
      {"adafactor-clip-threshold", 1.0, "largest RMS of an update (before the rate)", {}},
      {"adafactor-decay-rate", -0.8, "the second moment's decay is 1 - step^rate", {}},
      {"adafactor-beta1", 0.0, "a first moment with this decay (0: none, the paper's default)", {}},
      {"adafactor-eps1", 1e-30, "added to the squared gradient", {}},
      {"adafactor-eps2", 1e-3, "least parameter RMS the rate is scaled by", {}}};
  spec.check = [](const OptimizerOptions& o) { adafactor_settings(o); };
  spec.create = [](const ModelParameters& params, const OptimizerOptions& o) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<Adafactor>(decay_groups(params, o.lr, o.weight_decay), adafactor_settings(o));
  };
  return spec;
}

}  // namespace lmkit::train
