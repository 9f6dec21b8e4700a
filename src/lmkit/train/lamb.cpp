// LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76
// minutes", Algorithm 2): Adam's bias-corrected moments give r = m̂ / (√v̂ + ε); with the
// decoupled weight decay the step is u = r + λx, scaled per parameter (the paper's layer) by the
// trust ratio ‖x‖ / ‖u‖ (φ the identity; 1 when either norm is 0, as the reference
// implementations do), so every layer moves by the same fraction of its norm. Checked against a
// PyTorch reference of the algorithm in tests/interop/optimizer_parity.py.
#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/train/optimizers_builtin.h"

namespace lmkit::train {

namespace {

class Lamb : public StatefulOptimizer {
 public:
  Lamb(std::vector<torch::optim::OptimizerParamGroup> groups, double beta1, double beta2, double eps)
      : StatefulOptimizer(std::move(groups), std::make_unique<GroupOptions>()), beta1_(beta1), beta2_(beta2), eps_(eps) {}


 protected:
  void update(at::Tensor& p, const at::Tensor& grad, const GroupOptions& o) override {
    const double lr = o.get_lr(), weight_decay = o.weight_decay();
    TensorState& st = state_of(p);
    at::Tensor& m = st.tensors["exp_avg"];
    at::Tensor& v = st.tensors["exp_avg_sq"];
    if (!m.defined()) m = at::zeros_like(p, at::MemoryFormat::Preserve);
    if (!v.defined()) v = at::zeros_like(p, at::MemoryFormat::Preserve);
    st.step += 1;
    m.mul_(beta1_).add_(grad, 1 - beta1_);
    v.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
    const double correction1 = 1 - std::pow(beta1_, static_cast<double>(st.step));
    const double correction2 = 1 - std::pow(beta2_, static_cast<double>(st.step));
    at::Tensor u = (m / correction1) / ((v / correction2).sqrt_().add_(eps_));
    if (weight_decay != 0) u.add_(p, weight_decay);
    const at::Tensor w_norm = p.norm(2), u_norm = u.norm(2);
    // No host read: the ratio stays on the device.
    const at::Tensor trust = at::where(w_norm.gt(0).logical_and(u_norm.gt(0)), w_norm / u_norm, at::ones_like(w_norm));
    p.add_(u.mul_(trust), -lr);
  }


 private:
  double beta1_, beta2_, eps_;
};

}  // namespace

OptimizerSpec lamb_optimizer() {
  OptimizerSpec spec;
  spec.name = "lamb";
  spec.summary = "LAMB (You et al. 2020): Adam with a per-parameter trust ratio, for large batches";
  spec.create = [](const ModelParameters& params, const OptimizerOptions& o) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<Lamb>(decay_groups(params, o.lr, o.weight_decay), o.beta1, o.beta2, o.eps);
  };
  return spec;
}

}  // namespace lmkit::train
