// Relative position representations (Shaw, Uszkoreit and Vaswani 2018): learned key and value
// terms a^K, a^V (2k + 1, hd) by the clipped distance j − i ∈ [−k, k] (max_relative_position,
// tensor2tensor's default 20), shared by the heads:
//   e_ij = q_i·(k_j + a^K_{clip(j−i)})·s + bias_ij,   z_i = Σ_j α_ij (v_j + a^V_{clip(j−i)}).
// The q·a^K term is q times the 2k + 1 table rows, gathered per key; the α·a^V term sums each
// query's weights per distance bucket, times the table: O(T²·H + T·(2k + 1)·H·hd), as
// tensor2tensor's dot_product_attention_relative computes the same numbers.
#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::nn {

namespace {

class RelativeAttention : public AttentionKernel {
 public:
  RelativeAttention(torch::nn::Module& host, const AttentionSettings& s)
      : AttentionKernel(host, s), reach_(s.integer("max_relative_position")) {
    keys_ = host.register_parameter("relative_keys", at::randn({2 * reach_ + 1, s.head_dim}) * 0.02);
    values_ = host.register_parameter("relative_values", at::randn({2 * reach_ + 1, s.head_dim}) * 0.02);
  }

  at::Tensor attend(const AttentionInputs& in) override {
    const at::Tensor &q = in.q, &k = in.k;
    const int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2), buckets = 2 * reach_ + 1;
    // Query i sits at position (tk − tq) + i (a cache holds the first tk − tq); bucket of key j: clip(j − i) + k.
    const auto longs = q.options().dtype(at::kLong);
    const at::Tensor distance = at::arange(tk, longs).view({1, tk}) - at::arange(tk - tq, tk, longs).view({tq, 1});
    const at::Tensor bucket = distance.clamp(-reach_, reach_).add(reach_).view({1, 1, tq, tk}).expand({b, h, tq, tk});
    const at::Tensor qs = q * settings_.scale;
    at::Tensor scores = at::matmul(qs, k.transpose(-2, -1)) +
                        at::matmul(qs, keys_.to(q.scalar_type()).t()).gather(-1, bucket);  // (B, H, Tq, Tk)
    const at::Tensor bias = additive_bias(in.mask, b, tk, q.scalar_type());
    if (bias.defined()) scores = scores + bias.to(scores.scalar_type());
    if (settings_.causal && !bias.defined()) scores = scores + attention_bias({}, true, tq, tk, scores.scalar_type(), q.device());
    at::Tensor probs = at::softmax(scores, -1);
    if (dropout() > 0) probs = nn::dropout(probs, dropout(), true);
    const at::Tensor per_bucket = at::zeros({b, h, tq, buckets}, probs.options()).scatter_add(-1, bucket, probs);
    return at::matmul(probs, in.v) + at::matmul(per_bucket, values_.to(probs.scalar_type()));  // (B, H, Tq, hd)
  }

  double flops_per_token(int64_t keys) const override {
    const double inner = static_cast<double>(settings_.num_heads * settings_.head_dim);
    return 4.0 * static_cast<double>(keys) * inner + 4.0 * static_cast<double>(2 * reach_ + 1) * inner;
  }
  std::vector<std::string> parameter_names() const override { return {"relative_keys", "relative_values"}; }

 private:
  int64_t reach_;
  at::Tensor keys_, values_;  // a^K, a^V: (2k + 1, hd)
};

}  // namespace

AttentionSpec relative_attention() {
  AttentionSpec s;
  s.name = "relative";
  s.summary = "learned key and value terms by clipped relative distance (Shaw et al. 2018)";
  s.fields = {{"max_relative_position", int64_t{20}, "distances beyond ±k share the table's end rows (tensor2tensor's 20)",
               1, 1e6, {}}};
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<RelativeAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
