// Muon (Jordan et al. 2024; Liu et al. 2025, "Muon is Scalable for LLM Training"): the weight
// matrices of the layers follow the Nesterov momentum of their gradients orthogonalised by five
// Newton-Schulz iterations in bf16; everything else (embeddings, the output head, biases and
// norms) follows AdamW, as torch.optim.Muon's documentation prescribes. The matrix update is
// the computation of torch.optim.Muon of the pinned torch, the rest torch.optim.AdamW's
// single-tensor path (tests/interop/optimizer_parity.py checks 20 steps of both).
#include <ATen/ATen.h>

#include <cmath>
#include <regex>

#include "lmkit/core/error.h"
#include "lmkit/train/optimizers_builtin.h"

namespace lmkit::train {

namespace {

struct MuonSettings {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  std::string adjust_lr = "match_rms_adamw";
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  ///< the AdamW part's
};

// Keller Jordan's quintic Newton-Schulz iteration towards U V^T of G = U S V^T, in bf16, as
// torch.optim._muon._zeropower_via_newtonschulz (coefficients 3.4445, -4.7750, 2.0315).
at::Tensor orthogonalise(const at::Tensor& g, int64_t steps) {
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315, eps = 1e-7;
  const bool tall = g.size(0) > g.size(1);
  at::Tensor x = g.to(at::kBFloat16);  // (rows, cols), a copy
  if (tall) x = x.t();
  x.div_(x.norm().clamp_min(eps));  // spectral norm at most 1
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor gram = x.matmul(x.t());                       // (r, r)
    const at::Tensor poly = at::addmm(gram, gram, gram, b, c);    // b·A + c·A²
    x = at::addmm(x, poly, x, a, 1);                              // a·X + (b·A + c·A²)·X
  }
  return tall ? x.t() : x;
}

// torch's _adjust_lr: "original" sqrt(max(1, rows/cols)), "match_rms_adamw" 0.2 sqrt(max(rows, cols)).
double adjusted_rate(double lr, const std::string& how, const at::Tensor& p) {
  const double rows = static_cast<double>(p.size(0)), cols = static_cast<double>(p.size(1));
  return lr * (how == "original" ? std::sqrt(std::max(1.0, rows / cols)) : 0.2 * std::sqrt(std::max(rows, cols)));
}

class Muon : public StatefulOptimizer {
 public:
  Muon(std::vector<torch::optim::OptimizerParamGroup> groups, MuonSettings s)
      : StatefulOptimizer(std::move(groups), std::make_unique<GroupOptions>()), s_(std::move(s)) {}


 protected:
  void update(at::Tensor& p, const at::Tensor& grad, const GroupOptions& o) override {
    if (o.role() == "matrix") {
      matrix_update(p, grad, o.get_lr(), o.weight_decay());
    } else {
      adamw_update(p, grad, state_of(p), o.get_lr(), o.weight_decay(), s_.beta1, s_.beta2, s_.eps);
    }
  }

 private:
  void matrix_update(at::Tensor& p, const at::Tensor& grad, double lr, double weight_decay) {
    TensorState& st = state_of(p);
    at::Tensor& buf = st.tensors["momentum_buffer"];
    if (!buf.defined()) buf = at::zeros_like(grad, at::MemoryFormat::Preserve);
    st.step += 1;
    buf.lerp_(grad, 1 - s_.momentum);
    const at::Tensor update = orthogonalise(s_.nesterov ? grad.lerp(buf, s_.momentum) : buf, s_.ns_steps);
    p.mul_(1 - lr * weight_decay);
    p.add_(update, -adjusted_rate(lr, s_.adjust_lr, p));
  }

  MuonSettings s_;
};

// Muon's matrices: the 2-D weights inside a numbered layer ("h.3.attn.qkv.weight"), embedding tables excepted.
bool is_layer_matrix(const std::string& name, const at::Tensor& p, const ModelParameters& params) {
  static const std::regex numbered(R"((^|\.)[0-9]+\.)");
  return p.dim() == 2 && !params.tables.count(name) && std::regex_search(name, numbered);
}

MuonSettings muon_settings(const OptimizerOptions& o) {
  MuonSettings s;
  s.momentum = o.own.at("muon-momentum").get<double>();
  s.nesterov = o.own.at("muon-nesterov").get<bool>();
  const double ns_steps = o.own.at("muon-ns-steps").get<double>();
  s.adjust_lr = o.own.at("muon-adjust-lr").get<std::string>();
  s.beta1 = o.beta1;
  s.beta2 = o.beta2;
  s.eps = o.eps;
  check_input(s.momentum >= 0 && s.momentum < 1, "--muon-momentum must be in [0, 1)");
  check_input(ns_steps >= 1 && ns_steps < 100 && ns_steps == std::floor(ns_steps),
              "--muon-ns-steps must be a whole number from 1 to 99");
  s.ns_steps = static_cast<int64_t>(ns_steps);
  return s;
}

std::unique_ptr<torch::optim::Optimizer> create(const ModelParameters& params, const OptimizerOptions& o) {
  std::vector<at::Tensor> matrices, rest;
  for (const auto& [name, p] : params.named) (is_layer_matrix(name, p, params) ? matrices : rest).push_back(p);
  check_input(!matrices.empty(), "--optimizer muon: the model has no weight matrix inside a numbered layer for Muon");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(matrices, std::make_unique<GroupOptions>(o.lr, o.weight_decay, "matrix"));
  for (auto& g : decay_groups(rest, o.weight_decay, [&](double wd) { return std::make_unique<GroupOptions>(o.lr, wd, "adamw"); })) {
    groups.push_back(std::move(g));
  }
  return std::make_unique<Muon>(std::move(groups), muon_settings(o));
}

}  // namespace

OptimizerSpec muon_optimizer() {
  OptimizerSpec spec;
  spec.name = "muon";
  spec.summary = "Muon (Jordan et al. 2024) for the layers' weight matrices, AdamW for the rest; equal to torch.optim.Muon";
  spec.flags = {
      {"muon-momentum", 0.95, "the momentum of the matrices' update", {}},
      {"muon-nesterov", true, "Nesterov momentum", {}},
      {"muon-ns-steps", 5, "Newton-Schulz iterations", {}},
      {"muon-adjust-lr", std::string("match_rms_adamw"),
       "the matrices' rate: match_rms_adamw (0.2 sqrt(max(rows, cols)) --lr: AdamW's rate and decay carry over; "
       "Liu et al. 2025) or original (sqrt(max(1, rows/cols)) --lr)",
       {"match_rms_adamw", "original"}}};
  spec.check = [](const OptimizerOptions& o) { muon_settings(o); };
  spec.create = create;
  return spec;
}

}  // namespace lmkit::train
