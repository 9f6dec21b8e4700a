// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Program 1) as an
// lmkit plugin: one file, one registration. The update is the sign of an interpolation of
// the momentum and the gradient, so every element moves by exactly the learning rate:
//   u = sign(β1 m + (1 − β1) g);  θ ← θ − lr (u + λ θ);  m ← β2 m + (1 − β2) g
//   lmkit-pretrain --plugin liblmkit_lion.so --optimizer lion --lion-beta2 0.99 --lr 1e-4 ...
// Its state is lmkit's TensorState (one momentum a parameter), so checkpoints resume exactly.
#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/train/optimizer.h"

namespace {

using namespace lmkit;

class Lion : public train::StatefulOptimizer {
 public:
  Lion(std::vector<torch::optim::OptimizerParamGroup> groups, double beta1, double beta2)
      : StatefulOptimizer(std::move(groups), std::make_unique<train::GroupOptions>()), beta1_(beta1), beta2_(beta2) {}


 protected:
  void update(at::Tensor& p, const at::Tensor& grad, const train::GroupOptions& o) override {
    train::TensorState& st = state_of(p);
    at::Tensor& m = st.tensors["exp_avg"];
    if (!m.defined()) m = at::zeros_like(p, at::MemoryFormat::Preserve);
    st.step += 1;
    const at::Tensor direction = m.lerp(grad, 1 - beta1_).sign_();
    p.mul_(1 - o.get_lr() * o.weight_decay());
    p.add_(direction, -o.get_lr());
    m.lerp_(grad, 1 - beta2_);
  }

 private:
  double beta1_, beta2_;
};

void register_lion() {
  train::OptimizerSpec spec;
  spec.name = "lion";
  spec.summary = "Lion (Chen et al. 2023): the sign of interpolated momentum; use a 3-10x smaller --lr than AdamW's";
  spec.adam_flags = false;
  spec.shardable = true;
  spec.flags = {{"lion-beta1", 0.9, "the interpolation of momentum and gradient that gives the update's sign", {}},
                {"lion-beta2", 0.99, "the momentum's decay", {}}};
  spec.create = [](const train::ModelParameters& params, const train::OptimizerOptions& o)
      -> std::unique_ptr<torch::optim::Optimizer> {
    const double beta1 = o.own.at("lion-beta1").get<double>(), beta2 = o.own.at("lion-beta2").get<double>();
    check_input(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "--lion-beta1 and --lion-beta2 must be in [0, 1)");
    return std::make_unique<Lion>(train::decay_groups(params, o.lr, o.weight_decay), beta1, beta2);
  };
  train::register_optimizer(std::move(spec));
}

}  // namespace

LMKIT_PLUGIN(register_lion)
