// Longformer (Beltagy et al. 2020): each query sees the keys within local_window positions
// either side (HF's attention_window / 2) and the global tokens; the global tokens see every
// key through their own projections (q_global, kv_global), as HF's LongformerSelfAttention.
#include <ATen/ATen.h>

#include <tuple>

#include "lmkit/core/error.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"
#include "lmkit/nn/linear.h"

namespace lmkit::nn {

namespace {

class LongformerAttention : public AttentionKernel {
 public:
  LongformerAttention(torch::nn::Module& host, const AttentionSettings& s)
      : AttentionKernel(host, s), window_(s.integer("local_window")) {
    const int64_t d = s.embed_dim, inner = s.num_heads * s.head_dim;
    auto linear = [&](int64_t in, int64_t o) { return torch::nn::Linear(torch::nn::LinearOptions(in, o).bias(s.bias)); };
    q_global_ = host.register_module("q_global", linear(d, inner));
    kv_global_ = host.register_module("kv_global", linear(d, 2 * inner));
  }

  at::Tensor attend(const AttentionInputs& in) override {
    const at::Tensor &x = in.x, &q = in.q, &k = in.k, &v = in.v;
    const int64_t b = x.size(0), t = x.size(1), hd = settings_.head_dim;
    const double p = dropout();
    at::Tensor real = real_keys(in.mask, b, t, "Longformer");
    if (!real.defined()) real = at::ones({b, t}, x.options().dtype(at::kBool));
    at::Tensor global = in.mask.global.defined() ? in.mask.global.to(x.device()).ne(0) : at::zeros({b, t}, real.options());
    global = global.logical_and(real);  // padding is never global
    const at::Tensor padded = real.logical_not(), local = real.logical_and(global.logical_not());  // (B, T)
    // The most global tokens of a row (HF reads it to the host too, to size its tensors).
    const int64_t g = global.sum(1).max().item<int64_t>();
    at::Tensor y;
    if (g == 0) {
      y = banded_attention(q, k, v, local, window_, window_, settings_.scale, p, true);
    } else {
      // Row r's global positions in order, in its first slots; a row with fewer fills the rest
      // with non-global positions, which `ok` marks.
      const at::Tensor slots = std::get<1>(at::sort(global.logical_not().to(at::kLong), /*stable=*/true, 1, false)).slice(1, 0, g);
      const at::Tensor ok = global.gather(1, slots);  // (B, G)
      const at::Tensor at_slots = slots.view({b, 1, g, 1}).expand({b, k.size(1), g, hd});
      y = banded_attention(q, k, v, local, window_, window_, settings_.scale, p, true, k.gather(2, at_slots), v.gather(2, at_slots), ok);
      y = global_rows(x, y, slots, ok, padded, global);
    }
    return y.masked_fill(padded.view({b, 1, t, 1}), 0);  // HF zeroes the padding rows' probabilities
  }

  double flops_per_token(int64_t keys) const override {
    // Over the 2w + 1 keys of its window; the global projections run on the few global rows.
    return AttentionKernel::flops_per_token(std::min(keys, 2 * window_ + 1));
  }
  std::vector<std::string> parameter_names() const override {
    return {"q_global.weight", "q_global.bias", "kv_global.weight", "kv_global.bias"};
  }

 private:
  // The global rows' own attention over every real key (not `padded`), written over `y`
  // (B, H, T, hd) at the G `slots` (B, G) where `ok`: the rows `global` (B, T) marks.
  at::Tensor global_rows(const at::Tensor& x, const at::Tensor& y, const at::Tensor& slots, const at::Tensor& ok,
                         const at::Tensor& padded, const at::Tensor& global) {
    const int64_t b = x.size(0), t = x.size(1), g = slots.size(1), h = settings_.num_heads, hd = settings_.head_dim;
    auto heads = [&](const at::Tensor& z, int64_t n) { return z.view({b, z.size(1), n, h, hd}).permute({2, 0, 3, 1, 4}).unbind(0); };
    const at::Tensor xg = x.gather(1, slots.unsqueeze(-1).expand({b, g, x.size(2)}));  // (B, G, D)
    const at::Tensor qg = heads(linear(q_global_, xg), 1)[0];                           // (B, H, G, hd)
    const auto kvg = heads(linear(kv_global_, x), 2);                                   // 2 x (B, H, T, hd)
    const at::Tensor keys = bias_of(padded.logical_not().view({b, 1, 1, t}), y.scalar_type());
    const at::Tensor yg = scaled_dot_product(qg, kvg[0], kvg[1], keys, settings_.scale, dropout(), true);  // (B, H, G, hd)
    // Written at each slot's position; a slot that holds no global token writes past the end.
    const at::Tensor to = at::where(ok, slots, at::full({}, t, slots.options())).view({b, 1, g, 1}).expand({b, h, g, hd});
    const at::Tensor rows = at::zeros({b, h, t + 1, hd}, y.options()).scatter(2, to, yg).slice(2, 0, t);
    return at::where(global.view({b, 1, t, 1}), rows, y);
  }

  int64_t window_;
  torch::nn::Linear q_global_{nullptr};   // weight (H·hd, D)
  torch::nn::Linear kv_global_{nullptr};  // weight (2·H·hd, D)
};

}  // namespace

AttentionSpec longformer_attention() {
  AttentionSpec s;
  s.name = "longformer";
  s.summary = "a band of local_window keys either side and global tokens (Beltagy et al. 2020; Longformer's own)";
  s.causal = false;
  s.cache = false;
  s.documents = false;
  s.family_only = true;  // selected by model_type "longformer", its window by attention_window
  s.check = [](const AttentionSettings& settings) {
    check_input(settings.integer("local_window") >= 1, "attention: Longformer's local window must be at least 1");
  };
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<LongformerAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
