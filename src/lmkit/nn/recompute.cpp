#include "lmkit/nn/recompute.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "lmkit/core/error.h"

namespace lmkit::nn {

namespace {

std::atomic<bool> recompute_on{false};
std::atomic<bool> listed_only{false};

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
// Only the defined inputs pass through autograd; `defined` puts the others back. The
// parameters follow the inputs among the node's tensors (not saved: they are alive).
struct Saved : torch::CustomClassHolder {
  RecomputedFn fn;
  Generators generators;
  AutocastState autocast;
  std::vector<bool> defined;
  std::vector<at::Tensor> parameters;

  at::Tensor run(const std::vector<at::Tensor>& given) const {
    std::vector<at::Tensor> all;
    size_t k = 0;
    for (bool d : defined) all.push_back(d ? given[k++] : at::Tensor());
    return fn(all);
  }
};

// The leaves requiring gradients that `out`'s graph reaches.
std::vector<at::Tensor> leaves_of(const at::Tensor& out) {
  std::vector<at::Tensor> leaves;
  if (!out.grad_fn()) {
    if (out.requires_grad()) leaves.push_back(out);
    return leaves;
  }
  std::unordered_set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack = {out.grad_fn().get()};
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      leaves.push_back(acc->variable);
      continue;
    }
    for (const auto& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function.get());
    }
  }
  return leaves;
}

std::string shape_of(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + ")";
}

struct Recompute : torch::autograd::Function<Recompute> {
  // `tensors`: the defined inputs, then the parameters.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<Saved> saved, at::TensorList tensors) {
    const size_t n = tensors.size() - saved->parameters.size();
    std::vector<at::Tensor> given(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(n));
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
    // The gradients of the inputs, of the listed parameters and of any other leaf the block used.
    std::vector<at::Tensor> wanted;
    std::unordered_set<const void*> known;
    for (const auto& x : inputs) {
      known.insert(x.unsafeGetTensorImpl());
      if (x.requires_grad()) wanted.push_back(x);
    }
    const size_t n_inputs = wanted.size();
    for (const auto& p : saved->parameters) known.insert(p.unsafeGetTensorImpl()), wanted.push_back(p);
    std::vector<at::Tensor> others;
    if (out.requires_grad()) {
      for (const auto& leaf : leaves_of(out)) {
        if (known.insert(leaf.unsafeGetTensorImpl()).second) others.push_back(leaf);
      }
    }
    if (!others.empty() && listed_only.load()) {
      throw RuntimeError("a recomputed layer used a parameter of shape " + shape_of(others.front()) +
                         " that is not among its own or shared ones: data parallelism cannot reduce its gradient "
                         "(run without --recompute)");
    }
    wanted.insert(wanted.end(), others.begin(), others.end());
    std::vector<at::Tensor> g(wanted.size());
    if (out.requires_grad() && !wanted.empty()) {
      g = torch::autograd::grad({out}, wanted, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
    }
    {
      at::NoGradGuard no_grad;  // a leaf the block was not given: its gradient added here, as backward would
      for (size_t i = n_inputs + saved->parameters.size(); i < wanted.size(); ++i) {
        if (!g[i].defined()) continue;
        at::Tensor& acc = wanted[i].mutable_grad();
        acc = acc.defined() ? acc + g[i] : g[i];
      }
    }
    torch::autograd::variable_list result = {at::Tensor()};  // the capsule argument has none
    size_t k = 0;
    for (const auto& x : inputs) result.push_back(x.requires_grad() ? g[k++] : at::Tensor());
    for (size_t i = 0; i < saved->parameters.size(); ++i) result.push_back(g[n_inputs + i]);
    return result;
  }
};

}  // namespace

at::Tensor recompute(const RecomputedFn& fn, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& parameters) {
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
  // Each trainable parameter once: one listed twice would get its gradient twice.
  std::unordered_set<const void*> seen;
  for (const auto& p : parameters) {
    if (p.defined() && p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) saved->parameters.push_back(p);
  }
  given.insert(given.end(), saved->parameters.begin(), saved->parameters.end());
  saved->generators = Generators::capture(device);
  saved->autocast = AutocastState::capture(device);
  return Recompute::apply(saved, at::TensorList(given));
}

std::vector<at::Tensor> block_parameters(const torch::nn::Module& block, const std::vector<at::Tensor>& shared) {
  std::vector<at::Tensor> out = block.parameters();
  out.insert(out.end(), shared.begin(), shared.end());
  return out;
}

bool recompute_layers() { return recompute_on.load(); }
bool recompute_parameters_listed() { return listed_only.load(); }

RecomputeScope::RecomputeScope(bool on, bool parameters_listed)
    : before_(recompute_on.exchange(on)), listed_before_(listed_only.exchange(parameters_listed)) {}
RecomputeScope::~RecomputeScope() {
  recompute_on = before_;
  listed_only = listed_before_;
}

}  // namespace lmkit::nn
