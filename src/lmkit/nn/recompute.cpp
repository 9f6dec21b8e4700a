#include "lmkit/nn/recompute.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace lmkit::nn {

namespace {

std::atomic<bool> recompute_on{false};

at::Tensor state_of(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The generators a block may draw from: the CPU's, and the inputs' CUDA device's.
struct Generators {
  at::Tensor cpu, device;
  c10::Device where = c10::kCPU;

  static Generators capture(c10::Device device) {
    Generators g;
    g.cpu = state_of(at::detail::getDefaultCPUGenerator());
    g.where = device;
    if (device.is_cuda()) g.device = state_of(at::globalContext().defaultGenerator(device));
    return g;
  }
  void restore() const {
    set_state(at::detail::getDefaultCPUGenerator(), cpu);
    if (device.defined()) set_state(at::globalContext().defaultGenerator(where), device);
  }
};

// Autocast as the first run had it, for the inputs' device type and the CPU: backward runs
// outside autocast, and a block run again without it computes in another dtype (float32
// activations against the bf16 weights of --dtype bf16-weights: "mat1 and mat2 must have the
// same dtype"; float32 matmuls where the first run's were bf16 under --dtype bf16).
struct AutocastState {
  struct One {
    c10::DeviceType type = c10::DeviceType::CPU;
    bool on = false;
    c10::ScalarType dtype = c10::kBFloat16;
  };
  std::vector<One> types;

  static AutocastState capture(c10::Device device) {
    AutocastState a;
    for (c10::DeviceType t : {c10::DeviceType::CPU, device.type()}) {
      if (!a.types.empty() && a.types[0].type == t) continue;
      a.types.push_back({t, at::autocast::is_autocast_enabled(t), at::autocast::get_autocast_dtype(t)});
    }
    return a;
  }
};

// Puts an AutocastState in place while it lives, then the one before it.
class AutocastRestore {
 public:
  explicit AutocastRestore(const AutocastState& want) {
    for (const auto& one : want.types) {
      before_.types.push_back({one.type, at::autocast::is_autocast_enabled(one.type), at::autocast::get_autocast_dtype(one.type)});
      at::autocast::set_autocast_enabled(one.type, one.on);
      at::autocast::set_autocast_dtype(one.type, one.dtype);
    }
    any_on_ = std::any_of(want.types.begin(), want.types.end(), [](const AutocastState::One& o) { return o.on; });
    if (any_on_) at::autocast::increment_nesting();
  }
  ~AutocastRestore() {
    if (any_on_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    for (const auto& one : before_.types) {
      at::autocast::set_autocast_enabled(one.type, one.on);
      at::autocast::set_autocast_dtype(one.type, one.dtype);
    }
  }
  AutocastRestore(const AutocastRestore&) = delete;
  AutocastRestore& operator=(const AutocastRestore&) = delete;

 private:
  AutocastState before_;
  bool any_on_ = false;
};

// The function and the generator states travel to backward in a capsule of the context.
// Only the defined inputs pass through autograd; `defined` puts the others back.
struct Saved : torch::CustomClassHolder {
  RecomputedFn fn;
  Generators generators;
  AutocastState autocast;
  std::vector<bool> defined;

  at::Tensor run(const std::vector<at::Tensor>& given) const {
    std::vector<at::Tensor> all;
    size_t k = 0;
    for (bool d : defined) all.push_back(d ? given[k++] : at::Tensor());
    return fn(all);
  }
};

struct Recompute : torch::autograd::Function<Recompute> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<Saved> saved, at::TensorList inputs) {
    std::vector<at::Tensor> given(inputs.begin(), inputs.end());
    ctx->save_for_backward(given);
    ctx->saved_data["saved"] = c10::IValue::make_capsule(saved);
    at::NoGradGuard no_grad;  // autograd records nothing inside: no activation is kept
    return saved->run(given);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = c10::static_intrusive_pointer_cast<Saved>(ctx->saved_data["saved"].toCapsule());
    std::vector<at::Tensor> inputs = ctx->get_saved_variables();
    for (auto& x : inputs) x = x.detach().requires_grad_(x.requires_grad());
    const Generators now = Generators::capture(saved->generators.where);
    saved->generators.restore();  // the same dropout masks as the first run
    at::Tensor out;
    {
      at::AutoGradMode enable(true);
      const AutocastRestore autocast(saved->autocast);  // the first run's dtypes
      out = saved->run(inputs);
    }
    now.restore();
    if (out.requires_grad()) torch::autograd::backward({out}, {grads[0]});  // parameters' .grad, and the inputs' below
    torch::autograd::variable_list result = {at::Tensor()};                // the capsule argument has none
    for (const auto& x : inputs) result.push_back(x.requires_grad() ? x.grad() : at::Tensor());
    return result;
  }
};

}  // namespace

at::Tensor recompute(const RecomputedFn& fn, const std::vector<at::Tensor>& inputs) {
  if (!at::GradMode::is_enabled()) return fn(inputs);
  auto saved = c10::make_intrusive<Saved>();
  saved->fn = fn;
  std::vector<at::Tensor> given;
  c10::Device device = c10::kCPU;
  for (const auto& x : inputs) {
    saved->defined.push_back(x.defined());
    if (!x.defined()) continue;
    given.push_back(x);
    if (x.is_cuda()) device = x.device();
  }
  saved->generators = Generators::capture(device);
  saved->autocast = AutocastState::capture(device);
  return Recompute::apply(saved, at::TensorList(given));
}

bool recompute_layers() { return recompute_on.load(); }

RecomputeScope::RecomputeScope(bool on) : before_(recompute_on.exchange(on)) {}
RecomputeScope::~RecomputeScope() { recompute_on = before_; }

}  // namespace lmkit::nn
