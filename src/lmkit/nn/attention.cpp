#include "lmkit/nn/attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::nn {

double mask_value(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return std::numeric_limits<float>::lowest();
    case at::kDouble: return std::numeric_limits<double>::lowest();
    case at::kBFloat16: return -3.3895313892515355e38;  // lowest finite bfloat16
    case at::kHalf: return -65504.0;
    default: throw RuntimeError("attention bias: unsupported dtype");
  }
}

at::Tensor attention_bias(const at::Tensor& key_padding_mask, bool causal, int64_t q_len, int64_t k_len,
                          at::ScalarType dtype, at::Device device, bool causal_in_kernel, int64_t window) {
  if (window >= k_len) window = 0;  // every key is within the window
  if (causal && causal_in_kernel && !key_padding_mask.defined() && q_len == k_len && window == 0 &&
      !lever_disabled("flash")) {
    return {};
  }
  at::Tensor allowed;  // bool, broadcastable to (B, 1, Tq, Tk)
  if (key_padding_mask.defined()) {
    allowed = key_padding_mask.to(device).ne(0).view({key_padding_mask.size(0), 1, 1, k_len});
  }
  if (causal) {
    // Query i sits at absolute position (k_len - q_len) + i and may see keys up to it.
    auto opts = at::TensorOptions().dtype(at::kLong).device(device);
    at::Tensor qpos = at::arange(k_len - q_len, k_len, opts).view({q_len, 1});
    at::Tensor kpos = at::arange(k_len, opts).view({1, k_len});
    at::Tensor causal_ok = kpos.le(qpos);
    if (window > 0) causal_ok = causal_ok.logical_and(kpos.gt(qpos - window));
    causal_ok = causal_ok.view({1, 1, q_len, k_len});
    allowed = allowed.defined() ? allowed.logical_and(causal_ok) : causal_ok;
  }
  if (!allowed.defined()) return {};
  auto opts = at::TensorOptions().dtype(dtype).device(device);
  return at::where(allowed, at::zeros({}, opts), at::full({}, mask_value(dtype), opts));
}

void KVCache::keep_last(int64_t n) {
  const int64_t drop = length() - n;
  if (drop <= 0) return;
  // Views: the next step's cat copies them anyway, so a copy here would be a second one per step.
  key = key.slice(2, drop), value = value.slice(2, drop);
  dropped += drop;
}

at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& key_padding_mask, int64_t window, double scale, double dropout,
                                    bool training) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3), w = window;
  TORCH_CHECK(w > 0 && k.size(2) == t && v.size(2) == t, "sliding_window_attention: T queries, T keys, a window");
  if (t <= w) {
    const at::Tensor bias = attention_bias(key_padding_mask, true, t, t, q.scalar_type(), q.device(), true);
    return scaled_dot_product(q, k, v, bias, scale, dropout, training, AttentionBackend::kAuto, nullptr, !bias.defined());
  }
  const int64_t n = (t + w - 1) / w, padded = n * w;  // n blocks of w queries
  // Keys and values with one block of nothing before the first: block i's keys are
  // blocks i − 1 and i, positions (i − 1)·w .. (i + 1)·w − 1.
  auto blocks_of = [&](const at::Tensor& x) {
    const at::Tensor y = at::constant_pad_nd(x, {0, 0, w, padded - t});              // (B, H, (n + 1)·w, hd)
    return y.unfold(2, 2 * w, w).permute({0, 2, 1, 4, 3}).reshape({b * n, h, 2 * w, hd});  // (B·n, H, 2w, hd)
  };
  const at::Tensor qb = at::constant_pad_nd(q, {0, 0, 0, padded - t})
                            .view({b, h, n, w, hd}).permute({0, 2, 1, 3, 4}).reshape({b * n, h, w, hd});
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  // Query a of a block sees key j of its 2w when 0 ≤ (w + a) − j < w: a < j ≤ w + a.
  const at::Tensor a = at::arange(w, long_opts).view({w, 1}), j = at::arange(2 * w, long_opts).view({1, 2 * w});
  const at::Tensor band = j.gt(a).logical_and(j.le(a + w));  // (w, 2w)
  // Real keys: not before position 0, not past T, not padding.
  at::Tensor real = key_padding_mask.defined() ? key_padding_mask.to(q.device()).ne(0)
                                               : at::ones({b, t}, long_opts.dtype(at::kBool));
  real = at::constant_pad_nd(real.to(at::kByte), {w, padded - t}).ne(0);  // (B, (n + 1)·w)
  const at::Tensor keys_ok = real.unfold(1, 2 * w, w).reshape({b * n, 1, 1, 2 * w});
  const at::Tensor allowed = keys_ok.logical_and(band.view({1, 1, w, 2 * w}));  // (B·n, 1, w, 2w)
  const auto opts = q.options();
  const at::Tensor bias = at::where(allowed, at::zeros({}, opts), at::full({}, mask_value(q.scalar_type()), opts));
  const at::Tensor y = scaled_dot_product(qb, blocks_of(k), blocks_of(v), bias, scale, dropout, training);  // (B·n, H, w, hd)
  return y.view({b, n, h, w, hd}).permute({0, 2, 1, 3, 4}).reshape({b, h, padded, hd}).slice(2, 0, t);
}

at::Tensor scaled_dot_product(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                              double scale, double dropout, bool training, AttentionBackend backend,
                              at::Tensor* weights, bool causal) {
  const double p = training ? dropout : 0.0;
  TORCH_CHECK(!causal || (!bias.defined() && q.size(-2) == k.size(-2)),
              "causal attention in the kernel takes no bias and as many queries as keys");
  if (weights == nullptr && backend != AttentionBackend::kMath) {
    // No bias is an absent mask, not an undefined tensor (LibTorch 2.x rejects the latter).
    std::optional<at::Tensor> mask;
    if (bias.defined()) {
      mask = bias.scalar_type() == q.scalar_type() ? bias
                                                   : bias.clamp_min(mask_value(q.scalar_type())).to(q.scalar_type());
    }
    return at::scaled_dot_product_attention(q, k, v, mask, p, causal, scale);
  }
  at::Tensor scores = at::matmul(scale == 1.0 ? q : q * scale, k.transpose(-2, -1));  // (B, H, Tq, Tk)
  if (bias.defined()) scores.add_(bias);
  if (causal) scores.add_(attention_bias({}, true, q.size(-2), k.size(-2), scores.scalar_type(), scores.device()));
  at::Tensor probs = at::softmax(scores, -1);
  if (weights) *weights = probs;
  if (p > 0) probs = nn::dropout(probs, p, true);
  return at::matmul(probs, v);  // (B, H, Tq, hd)
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(MultiHeadAttentionOptions options_) : options(std::move(options_)) {
  const int64_t d = options.embed_dim(), h = options.num_heads();
  check_input(d > 0 && h > 0, "attention: embed_dim and num_heads must be positive");
  head_dim_ = options.head_dim() > 0 ? options.head_dim() : d / h;
  check_input(options.head_dim() > 0 || d % h == 0,
              "attention: embed_dim " + std::to_string(d) + " is not divisible by num_heads " + std::to_string(h));
  const int64_t inner = h * head_dim_;
  auto linear = [&](int64_t in, int64_t o) { return torch::nn::LinearOptions(in, o).bias(options.bias()); };
  if (options.cross_attention()) {
    const int64_t m = options.memory_dim() > 0 ? options.memory_dim() : d;
    q = register_module("q", torch::nn::Linear(linear(d, inner)));
    kv = register_module("kv", torch::nn::Linear(linear(m, 2 * inner)));
  } else {
    qkv = register_module("qkv", torch::nn::Linear(linear(d, 3 * inner)));
  }
  out = register_module("out", torch::nn::Linear(linear(inner, d)));
  const int64_t k = options.linformer_k(), n = options.linformer_length();
  if (k > 0) {
    check_input(!options.cross_attention() && !options.causal() && n >= k,
                "attention: Linformer is an encoder's self-attention with linformer_k <= its length");
    // Xavier's normal draw for a (k, n) map, as Linformer's projections are initialised.
    const double std = 1.0 / std::sqrt(static_cast<double>(n + k));
    if (options.linformer_projections() >= 1) linformer_e = register_parameter("linformer_e", at::randn({k, n}) * std);
    if (options.linformer_projections() >= 2) linformer_f = register_parameter("linformer_f", at::randn({k, n}) * std);
  }
}

std::pair<at::Tensor, at::Tensor> MultiHeadAttentionImpl::linformer_keys(const at::Tensor& kh, const at::Tensor& vh,
                                                                        const at::Tensor& mask) const {
  const int64_t t = kh.size(2);
  check_input(t <= linformer_e.size(1), "attention: an input of " + std::to_string(t) + " positions is longer than Linformer's " +
                                            std::to_string(linformer_e.size(1)));
  at::Tensor k = kh, v = vh;
  if (mask.defined()) {  // a key-padding bias (B|1, 1, 1, T): 0 where a key is real
    check_input(mask.size(-2) == 1, "attention: Linformer takes a key-padding mask only");
    const at::Tensor keep = mask.eq(0).transpose(-1, -2).to(kh.scalar_type());  // (B|1, 1, T, 1)
    k = k * keep;
    v = v * keep;
  }
  const at::Tensor& f = linformer_f.defined() ? linformer_f : linformer_e;
  return {at::matmul(linformer_e.slice(1, 0, t).to(kh.scalar_type()), k),  // (k, T) · (B, H, T, hd)
          at::matmul(f.slice(1, 0, t).to(vh.scalar_type()), v)};
}

std::vector<at::Tensor> MultiHeadAttentionImpl::split_heads(const at::Tensor& x, int64_t n) const {
  const int64_t b = x.size(0), t = x.size(1), h = options.num_heads();
  if (n == 3 && options.qkv_per_head()) return x.view({b, t, h, n, head_dim_}).permute({3, 0, 2, 1, 4}).unbind(0);
  return x.view({b, t, n, h, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);  // n x (B, H, T, hd)
}

at::Tensor MultiHeadAttentionImpl::forward(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& memory,
                                           KVCache* cache) {
  const int64_t b = x.size(0), t = x.size(1);
  at::Tensor qh, kh, vh;
  if (options.cross_attention()) {
    qh = split_heads(linear(q, x), 1)[0];  // (B, H, T, hd)
    if (cache && cache->length() > 0) {
      kh = cache->key, vh = cache->value;  // the memory does not change while decoding
    } else {
      TORCH_CHECK(memory.defined(), "cross-attention needs a memory tensor");
      auto kvh = split_heads(linear(kv, memory), 2);  // 2 x (B, H, S, hd)
      kh = kvh[0], vh = kvh[1];
      if (cache) cache->key = kh, cache->value = vh;
    }
  } else {
    auto qkvh = split_heads(linear(qkv, x), 3);  // 3 x (B, H, T, hd)
    qh = qkvh[0], kh = qkvh[1], vh = qkvh[2];
    if (cache) {
      if (cache->length() > 0) {
        kh = at::cat({cache->key, kh}, 2);  // (B, H, T_cached + T, hd)
        vh = at::cat({cache->value, vh}, 2);
      }
      cache->key = kh, cache->value = vh;
    }
  }
  const double scale = options.scale_scores() ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  if (linformer_e.defined()) {
    std::tie(kh, vh) = linformer_keys(kh, vh, bias);  // (B, H, k, hd): no key is padding any more
    at::Tensor y = scaled_dot_product(qh, kh, vh, {}, scale, options.dropout(), is_training(), options.backend());
    return linear(out, y.transpose(1, 2).reshape({b, t, inner_dim()}));  // (B, T, D)
  }
  // A causal layer called without a bias masks in the kernel; past keys (a cache) need the bias.
  at::Tensor mask = bias;
  bool in_kernel = false;
  if (options.causal() && !bias.defined()) {
    in_kernel = qh.size(2) == kh.size(2);
    if (!in_kernel) mask = attention_bias({}, true, qh.size(2), kh.size(2), qh.scalar_type(), qh.device());
  }
  at::Tensor y = scaled_dot_product(qh, kh, vh, mask, scale, options.dropout(), is_training(), options.backend(),
                                    nullptr, in_kernel);
  y = y.transpose(1, 2).reshape({b, t, inner_dim()});  // (B, T, H·hd)
  return linear(out, y);                                // (B, T, D)
}

}  // namespace lmkit::nn
