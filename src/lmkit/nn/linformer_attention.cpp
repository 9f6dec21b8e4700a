// Linformer (Wang et al. 2020): keys and values projected along the sequence to k rows,
// K' = E·K and V' = F·V with E, F (k, n) shared by the heads, so attention costs O(T·k).
// An encoder's self-attention: padded keys are zeroed before the projection.
#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"

namespace lmkit::nn {

namespace {

class LinformerAttention : public AttentionKernel {
 public:
  LinformerAttention(torch::nn::Module& host, const AttentionSettings& s) : AttentionKernel(host, s) {
    const int64_t k = s.integer("linformer_k"), n = s.max_length;
    const std::string sharing = s.text("linformer_sharing");
    // Xavier's normal draw for a (k, n) map, as Linformer's projections are initialised.
    const double std = 1.0 / std::sqrt(static_cast<double>(n + k));
    auto& shared = (*s.shared)["linformer_e"];
    if (sharing == "layerwise" && shared.defined()) {
      e_ = shared;  // layerwise sharing: the stack's first layer owns the one projection
    } else {
      e_ = host.register_parameter("linformer_e", at::randn({k, n}) * std);
      owned_.push_back("linformer_e");
      if (sharing == "layerwise") shared = e_;
    }
    if (sharing == "headwise") {
      f_ = host.register_parameter("linformer_f", at::randn({k, n}) * std);
      owned_.push_back("linformer_f");
    }
  }

  at::Tensor attend(const AttentionInputs& in) override {
    const int64_t b = in.k.size(0), t = in.k.size(2), k = e_.size(0);
    check_input(t <= e_.size(1), "attention: an input of " + std::to_string(t) + " positions is longer than Linformer's " +
                                     std::to_string(e_.size(1)));
    // The one place every app's forward passes (training, finetuning, evaluation, lmkit-forward):
    // an input shorter than k trained and evaluated here, then was refused by lmkit-forward.
    check_input(t >= k, "input of " + std::to_string(t) + " positions, fewer than linformer_k " + std::to_string(k) +
                            ": Linformer projects the keys to k rows (give longer inputs, e.g. --seq-len, or a smaller linformer_k)");
    at::Tensor key = in.k, value = in.v;
    const at::Tensor real = real_keys(in.mask, b, t, "Linformer");
    if (real.defined()) {  // padded keys zeroed
      const at::Tensor keep = real.view({b, 1, t, 1}).to(key.scalar_type());
      key = key * keep;
      value = value * keep;
    }
    const at::Tensor& f = f_.defined() ? f_ : e_;
    key = at::matmul(e_.slice(1, 0, t).to(key.scalar_type()), key);  // (k, T) · (B, H, T, hd)
    value = at::matmul(f.slice(1, 0, t).to(value.scalar_type()), value);
    // No key is padding any more.
    return scaled_dot_product(in.q, key, value, {}, settings_.scale, settings_.dropout, training(), settings_.backend);
  }

  double flops_per_token(int64_t) const override {
    // Scores and values over k projected keys, and the projections E·K, F·V (k per token each).
    return 8.0 * static_cast<double>(e_.size(0)) * static_cast<double>(settings_.num_heads * settings_.head_dim);
  }
  std::vector<std::string> parameter_names() const override { return owned_; }
  at::Tensor tensor(const std::string& name) const override {
    return name == "linformer_e" ? e_ : name == "linformer_f" ? f_ : at::Tensor();
  }

 private:
  at::Tensor e_, f_;  // (k, n): the key projection, and the value one (undefined: E projects the values too)
  std::vector<std::string> owned_;
};

}  // namespace

AttentionSpec linformer_attention() {
  AttentionSpec s;
  s.name = "linformer";
  s.summary = "keys and values projected along the sequence to linformer_k rows, O(T·k) (Wang et al. 2020)";
  s.fields = {{"linformer_k", int64_t{256}, "rows the keys and values are projected to", 1, 1e18, {}},
              {"linformer_sharing", "headwise", "the projections shared: each layer's E and F for its heads, one E a layer, or one E",
               0, 0, {"headwise", "key-value", "layerwise"}}};
  s.causal = false;
  s.cache = false;
  s.documents = false;  // the projection mixes positions across documents
  s.check = [](const AttentionSettings& settings) {
    check_input(settings.max_length >= settings.integer("linformer_k"),
                "attention: Linformer's linformer_k " + std::to_string(settings.integer("linformer_k")) +
                    " is above its length " + std::to_string(settings.max_length));
  };
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<LinformerAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
