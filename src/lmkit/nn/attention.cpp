#include "lmkit/nn/attention.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"
#include "lmkit/nn/position.h"

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

namespace {

// The keys each query may see (bool, broadcastable to (B, 1, Tq, Tk)); undefined: all.
at::Tensor allowed_keys(const at::Tensor& key_padding_mask, bool causal, int64_t q_len, int64_t k_len, at::Device device,
                        int64_t window) {
  at::Tensor allowed;
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
  return allowed;
}

}  // namespace

at::Tensor attention_bias(const at::Tensor& key_padding_mask, bool causal, int64_t q_len, int64_t k_len,
                          at::ScalarType dtype, at::Device device, bool causal_in_kernel, int64_t window) {
  if (window >= k_len) window = 0;  // every key is within the window
  if (causal && causal_in_kernel && !key_padding_mask.defined() && q_len == k_len && window == 0 &&
      !lever_disabled("flash")) {
    return {};
  }
  const at::Tensor allowed = allowed_keys(key_padding_mask, causal, q_len, k_len, device, window);
  if (!allowed.defined()) return {};
  return bias_of(allowed, dtype);
}

at::Tensor document_attention_bias(const at::Tensor& document_ids, const at::Tensor& key_padding_mask, bool causal,
                                   at::ScalarType dtype, at::Device device, int64_t window) {
  const int64_t b = document_ids.size(0), t = document_ids.size(1);
  if (window >= t) window = 0;
  const at::Tensor docs = document_ids.to(device);
  at::Tensor allowed = docs.view({b, 1, t, 1}).eq(docs.view({b, 1, 1, t}));  // (B, 1, T, T): the same document
  const at::Tensor others = allowed_keys(key_padding_mask, causal, t, t, device, window);
  if (others.defined()) allowed = allowed.logical_and(others);
  return bias_of(allowed, dtype);
}

std::pair<at::Tensor, at::Tensor> document_segments(const at::Tensor& document_ids, const at::Tensor& key_padding_mask,
                                                    at::Device device) {
  const at::Tensor docs = document_ids.to(at::kCPU);  // (B, T)
  const int64_t t = docs.size(1);
  at::Tensor starts = at::ones(docs.sizes(), at::TensorOptions().dtype(at::kBool));
  if (t > 1) {
    at::Tensor change = docs.slice(1, 1).ne(docs.slice(1, 0, t - 1));
    if (key_padding_mask.defined()) {
      const at::Tensor real = key_padding_mask.to(at::kCPU).ne(0);
      change = change.logical_or(real.slice(1, 1).ne(real.slice(1, 0, t - 1)));
    }
    starts.slice(1, 1).copy_(change);
  }
  const at::Tensor offsets =
      at::cat({at::nonzero(starts.reshape({-1})).reshape({-1}), at::full({1}, docs.numel(), at::kLong)});
  const at::Tensor longest = (offsets.slice(0, 1) - offsets.slice(0, 0, -1)).max();
  return {offsets.to(at::kInt).to(device), longest};
}

AttentionMask document_mask(const at::Tensor& document_ids, const at::Tensor& key_padding_mask, bool causal,
                            at::ScalarType dtype, at::Device device, int64_t window) {
  AttentionMask mask(document_attention_bias(document_ids, key_padding_mask, causal, dtype, device, window));
  const c10::DeviceType type = device.type();
  const at::ScalarType compute =
      device.is_cuda() && at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type) : dtype;
  if (device.is_cuda() && (compute == at::kBFloat16 || compute == at::kHalf) && !lever_disabled("varlen")) {
    std::tie(mask.segment_offsets, mask.longest_segment) = document_segments(document_ids, key_padding_mask, device);
  }
  return mask;
}

bool varlen_applies(const at::Tensor& q, const at::Tensor& k, const AttentionMask& mask) {
  const at::ScalarType type = q.scalar_type();
  return mask.segment_offsets.defined() && q.is_cuda() && (type == at::kBFloat16 || type == at::kHalf) &&
         k.scalar_type() == type && q.dim() == 4 && q.sizes() == k.sizes() && q.size(3) % 8 == 0 && q.size(3) <= 256;
}

at::Tensor varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionMask& mask,
                            double scale, double dropout, bool training, bool causal, int64_t window) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3);
  auto packed = [&](const at::Tensor& x) { return x.transpose(1, 2).reshape({b * t, h, hd}); };  // (B·T, H, hd)
  const int64_t longest = mask.longest_segment.item<int64_t>();  // on the host: no device read
  std::optional<int64_t> left, right;  // flash's window: keys i − left ..= i + right
  if (causal && window > 0 && window < longest) left = window - 1, right = 0;
  const at::Tensor out = std::get<0>(at::_flash_attention_forward(
      packed(q), packed(k), packed(v), mask.segment_offsets, mask.segment_offsets, longest, longest,
      training ? dropout : 0.0, causal, /*return_debug_mask=*/false, scale, left, right));
  return out.view({b, t, h, hd}).transpose(1, 2);  // (B, H, T, hd)
}

void KVCache::keep_last(int64_t n) {
  const int64_t drop = length() - n;
  if (drop <= 0) return;
  // Views: the next append copies them anyway, so a copy here would be a second one per step.
  key = key.slice(2, drop), value = value.slice(2, drop);
  dropped += drop;
}

// Whether key and value are still the views append() made: of the buffers, ending at the last
// position written (not replaced, reordered or cut short since).
bool KVCache::views_buffers() const {
  auto ends_at_filled = [&](const at::Tensor& view, const at::Tensor& buffer) {
    if (!view.defined() || !buffer.defined() || !view.is_alias_of(buffer) || view.dim() != 4 ||
        view.strides() != buffer.strides() || view.sizes().slice(0, 2) != buffer.sizes().slice(0, 2) ||
        view.size(3) != buffer.size(3)) {
      return false;
    }
    const int64_t start = (view.storage_offset() - buffer.storage_offset()) / buffer.stride(2);
    return start + view.size(2) == *filled_;
  };
  return filled_ && ends_at_filled(key, key_buffer_) && ends_at_filled(value, value_buffer_);
}

void KVCache::append(const at::Tensor& k, const at::Tensor& v) {
  const int64_t held = length(), t = k.size(2);
  const bool same_kind = held == 0 || (k.sizes().slice(0, 2) == key.sizes().slice(0, 2) && k.size(3) == key.size(3) &&
                                       k.scalar_type() == key.scalar_type() && k.device() == key.device());
  const bool buffered = !at::GradMode::is_enabled() && same_kind && views_buffers();
  if (at::GradMode::is_enabled() || !same_kind || (!buffered && t > 1)) {
    // In-place writes would invalidate what autograd saved for backward: a new tensor (and
    // cat's own error for keys that do not fit the held ones). A prompt, or a block appended
    // to a cache not in a buffer (in-context scoring's choices after the shared context),
    // starts none either: the buffer's room to spare is for decoding token by token.
    key = held > 0 ? at::cat({key, k}, 2) : k;
    value = held > 0 ? at::cat({value, v}, 2) : v;
    key_buffer_ = value_buffer_ = at::Tensor();
    filled_.reset();
    return;
  }
  if (!buffered) key_buffer_ = value_buffer_ = at::Tensor();  // empty, replaced from outside, or a stale copy
  if (!key_buffer_.defined() || *filled_ + t > key_buffer_.size(2)) {
    // A new buffer with room for as many positions again (at least 64): the held ones move to
    // its front, so a sliding window's rolling cache never outgrows twice its window.
    const int64_t capacity = std::max<int64_t>(64, 2 * (held + t));
    auto grown = [&](const at::Tensor& held_part, const at::Tensor& like) {
      at::Tensor buffer = at::empty({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
      if (held > 0) buffer.narrow(2, 0, held).copy_(held_part);
      return buffer;
    };
    key_buffer_ = grown(key, k), value_buffer_ = grown(value, v);
    filled_ = std::make_shared<int64_t>(held);
  }
  int64_t& filled = *filled_;
  key_buffer_.narrow(2, filled, t).copy_(k);
  value_buffer_.narrow(2, filled, t).copy_(v);
  filled += t;
  key = key_buffer_.narrow(2, filled - held - t, held + t);
  value = value_buffer_.narrow(2, filled - held - t, held + t);
}

Band::Band(int64_t t, int64_t before, int64_t after)
    : s(std::max<int64_t>({before, after, 1})), n((t + s - 1) / s), lo((before + s - 1) / s), hi((after + s - 1) / s),
      nk((lo + 1 + hi) * s) {}

at::Tensor banded_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_ok,
                            int64_t before, int64_t after, double scale, double dropout, bool training,
                            const at::Tensor& global_key, const at::Tensor& global_value, const at::Tensor& global_ok) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3);
  TORCH_CHECK(before >= 0 && after >= 0 && k.size(2) == t && v.size(2) == t, "banded_attention: T queries, T keys");
  const Band blocks(t, before, after);
  const int64_t s = blocks.s, n = blocks.n, padded = n * s, lo = blocks.lo, hi = blocks.hi, nk = blocks.nk;
  // Block i's keys: positions (i − lo)·s .. (i + 1 + hi)·s − 1, nothing beyond either end.
  auto blocks_of = [&](const at::Tensor& x) {
    const at::Tensor y = at::constant_pad_nd(x, {0, 0, lo * s, padded - t + hi * s});      // (B, H, (n + lo + hi)·s, hd)
    return y.unfold(2, nk, s).permute({0, 2, 1, 4, 3}).reshape({b * n, h, nk, hd});  // (B·n, H, nk, hd)
  };
  const at::Tensor qb = at::constant_pad_nd(q, {0, 0, 0, padded - t})
                            .view({b, h, n, s, hd}).permute({0, 2, 1, 3, 4}).reshape({b * n, h, s, hd});
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  // Query a of a block sees key j of its nk when −before ≤ j − lo·s − a ≤ after.
  const at::Tensor a = at::arange(s, long_opts).view({s, 1}), j = at::arange(nk, long_opts).view({1, nk});
  const at::Tensor offset = j - lo * s - a;
  const at::Tensor band = offset.ge(-before).logical_and(offset.le(after));  // (s, nk)
  at::Tensor real = key_ok.defined() ? key_ok.to(q.device()).to(at::kByte) : at::ones({b, t}, long_opts.dtype(at::kByte));
  real = at::constant_pad_nd(real, {lo * s, padded - t + hi * s}).ne(0);  // (B, (n + lo + hi)·s)
  at::Tensor allowed = real.unfold(1, nk, s).reshape({b * n, 1, 1, nk}).logical_and(band.view({1, 1, s, nk}));
  at::Tensor kb = blocks_of(k), vb = blocks_of(v);
  if (global_key.defined()) {  // keys every block sees, before its band
    const int64_t g = global_key.size(2);
    auto every_block = [&](const at::Tensor& x) { return x.unsqueeze(1).expand({b, n, h, g, hd}).reshape({b * n, h, g, hd}); };
    kb = at::cat({every_block(global_key), kb}, 2), vb = at::cat({every_block(global_value), vb}, 2);
    const at::Tensor seen = global_ok.to(q.device()).view({b, 1, 1, 1, g}).expand({b, n, 1, s, g}).reshape({b * n, 1, s, g});
    allowed = at::cat({seen, allowed.expand({b * n, 1, s, nk})}, 3);  // (B·n, 1, s, G + nk)
  }
  const at::Tensor y = scaled_dot_product(qb, kb, vb, bias_of(allowed, q.scalar_type()), scale, dropout, training);  // (B·n, H, s, hd)
  return y.view({b, n, h, s, hd}).permute({0, 2, 1, 3, 4}).reshape({b, h, padded, hd}).slice(2, 0, t);
}

at::Tensor block_sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_ok,
                                  int64_t bs, const at::Tensor& random_blocks, double scale) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hd = q.size(3), nb = t / bs, m = nb - 2;
  const int64_t r = random_blocks.size(2);
  TORCH_CHECK(t % bs == 0 && m >= 3 && random_blocks.size(0) == h && random_blocks.size(1) == m,
              "block_sparse_attention: whole blocks, at least 5, random blocks (H, nb - 2, r)");
  const auto opts = q.options();
  const at::Tensor real = key_ok.defined() ? key_ok.to(q.device()) : at::ones({b, t}, opts.dtype(at::kBool));
  const auto dtype = q.scalar_type();
  // The first and last query blocks see every key.
  const at::Tensor qg = at::cat({q.slice(2, 0, bs), q.slice(2, t - bs, t)}, 2);  // (B, H, 2bs, hd)
  const at::Tensor yg = scaled_dot_product(qg, k, v, bias_of(real.view({b, 1, 1, t}), dtype), scale, 0.0, false);
  // Query block i (1 .. nb − 2): key blocks 0, i − 1, i, i + 1, nb − 1, then its random ones.
  const auto long_opts = opts.dtype(at::kLong);
  const at::Tensor i = at::arange(1, nb - 1, long_opts).view({m, 1});
  const at::Tensor fixed = at::cat({at::zeros_like(i), i - 1, i, i + 1, at::full_like(i, nb - 1)}, 1);  // (m, 5)
  const at::Tensor blocks = at::cat({fixed.unsqueeze(0).expand({h, m, 5}), random_blocks.to(q.device())}, 2);  // (H, m, 5 + r)
  const int64_t n = 5 + r;
  auto gathered = [&](const at::Tensor& x) {  // (B, H, T, hd) -> (B, H·m, n·bs, hd)
    const at::Tensor at_blocks = blocks.reshape({1, h, m * n, 1, 1}).expand({b, h, m * n, bs, hd});
    return x.view({b, h, nb, bs, hd}).gather(2, at_blocks).reshape({b, h * m, n * bs, hd});
  };
  // Each key block once: block 0 is also block i − 1 of i = 1, block nb − 1 also i + 1 of i = nb − 2.
  at::Tensor once = at::ones({m, n}, opts.dtype(at::kBool));
  once.index_put_({0, 1}, false);
  once.index_put_({m - 1, 3}, false);
  const at::Tensor key_blocks = real.view({b, 1, nb, bs}).expand({b, h, nb, bs})
                                    .gather(2, blocks.reshape({1, h, m * n, 1}).expand({b, h, m * n, bs}));  // (B, H, m·n, bs)
  const at::Tensor allowed = key_blocks.view({b, h, m, n, bs}).logical_and(once.view({1, 1, m, n, 1}));
  const at::Tensor qm = q.slice(2, bs, t - bs).reshape({b, h * m, bs, hd});
  const at::Tensor ym = scaled_dot_product(qm, gathered(k), gathered(v), bias_of(allowed.reshape({b, h * m, 1, n * bs}), dtype),
                                           scale, 0.0, false);  // (B, H·m, bs, hd)
  const at::Tensor y = at::cat({yg.slice(2, 0, bs), ym.reshape({b, h, m * bs, hd}), yg.slice(2, bs, 2 * bs)}, 2);
  return y.masked_fill(real.logical_not().view({b, 1, t, 1}), 0);  // HF: times from_mask
}

at::Tensor draw_random_blocks(int64_t heads, int64_t blocks, int64_t r, at::Device device) {
  const int64_t m = blocks - 2;
  const auto opts = at::TensorOptions().device(device);
  // A uniform draw for each (head, query block, candidate); the r highest legal ones are a
  // uniformly random r-subset of the legal blocks.
  at::Tensor score = at::rand({heads, m, blocks}, opts.dtype(at::kFloat));
  const at::Tensor i = at::arange(1, blocks - 1, opts.dtype(at::kLong)).view({1, m, 1});
  const at::Tensor j = at::arange(blocks, opts.dtype(at::kLong)).view({1, 1, blocks});
  const at::Tensor legal = j.ge(1).logical_and(j.le(blocks - 2)).logical_and((j - i).abs().gt(1));
  score = score.masked_fill(legal.logical_not(), -1.0);
  return std::get<1>(score.topk(r, -1));  // (H, m, r)
}

at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& key_padding_mask, int64_t window, double scale, double dropout,
                                    bool training) {
  const int64_t t = q.size(2);
  TORCH_CHECK(window > 0, "sliding_window_attention: a window of at least one position");
  // The band computes scores for its blocks of window − 1 queries against twice as many keys,
  // about 2·T·window; the masked product T². Below T ≈ 3 windows the product is the cheaper.
  if (t <= window || Band(t, window - 1, 0).scores() >= t * t) {
    const at::Tensor bias = attention_bias(key_padding_mask, true, t, t, q.scalar_type(), q.device(), true, window);
    return scaled_dot_product(q, k, v, bias, scale, dropout, training, AttentionBackend::kAuto, nullptr, !bias.defined());
  }
  const at::Tensor real = key_padding_mask.defined() ? key_padding_mask.ne(0) : at::Tensor();
  return banded_attention(q, k, v, real, window - 1, 0, scale, dropout, training);
}

at::Tensor scaled_dot_product(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                              double scale, double dropout, bool training, AttentionBackend backend,
                              at::Tensor* weights, bool causal) {
  const double p = training ? dropout : 0.0;
  TORCH_CHECK(!causal || (!bias.defined() && q.size(-2) == k.size(-2)),
              "causal attention in the kernel takes no bias and as many queries as keys");
  // LibTorch's CPU attention drops its weights with the serial bernoulli_ (about 5% of a gpt-mini
  // step); the composite below drops them with lmkit's parallel dropout (nn/dropout.h).
  const bool own_dropout = p > 0 && q.device().is_cpu() && !lever_disabled("dropout");
  if (weights == nullptr && backend != AttentionBackend::kMath && !own_dropout) {
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
  kv_heads_ = options.kv_heads() > 0 ? options.kv_heads() : h;
  check_input(h % kv_heads_ == 0, "attention: num_heads " + std::to_string(h) + " is not a multiple of kv_heads " +
                                      std::to_string(kv_heads_));
  const bool self = !options.cross_attention();
  check_input(self || (kv_heads_ == h && !options.separate_qkv() && options.window() == 0),
              "attention: grouped-query heads, separate q/k/v and a sliding window are for self-attention");
  check_input(kv_heads_ == h || !options.qkv_per_head(), "attention: qkv rows grouped by head take as many key/value heads as heads");
  check_input(options.window() >= 0 && (options.window() == 0 || options.causal()),
              "attention: a sliding window is for causal self-attention");
  const int64_t inner = h * head_dim_, kv_inner = kv_heads_ * head_dim_;
  auto linear = [&](int64_t in, int64_t o) { return torch::nn::LinearOptions(in, o).bias(options.bias()); };
  if (!self) {
    const int64_t m = options.memory_dim() > 0 ? options.memory_dim() : d;
    q = register_module("q", torch::nn::Linear(linear(d, inner)));
    kv = register_module("kv", torch::nn::Linear(linear(m, 2 * inner)));
  } else if (options.separate_qkv()) {
    q = register_module("q", torch::nn::Linear(linear(d, inner)));
    k = register_module("k", torch::nn::Linear(linear(d, kv_inner)));
    v = register_module("v", torch::nn::Linear(linear(d, kv_inner)));
  } else {
    qkv = register_module("qkv", torch::nn::Linear(linear(d, inner + 2 * kv_inner)));
  }
  out = register_module("out", torch::nn::Linear(linear(inner, d)));
  AttentionSettings s;
  s.embed_dim = d;
  s.num_heads = h;
  s.head_dim = head_dim_;
  s.bias = options.bias();
  s.scale = options.scale_scores() ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  s.dropout = options.dropout();
  s.causal = options.causal();
  s.cross = options.cross_attention();
  s.window = options.window();
  s.backend = options.backend();
  s.layer = options.layer();
  s.max_length = options.max_length();
  s.fields = options.attention_fields();
  s.shared = options.shared() ? options.shared() : std::make_shared<SharedTensors>();
  kernel_ = make_attention_kernel(options.attention(), *this, s);
}

at::Tensor MultiHeadAttentionImpl::kernel_parameter(const std::string& name) const {
  const auto params = named_parameters(/*recurse=*/false);
  const at::Tensor* found = params.find(name);
  return found ? *found : at::Tensor();
}

torch::nn::Linear MultiHeadAttentionImpl::kernel_linear(const std::string& name) const {
  for (const auto& child : named_children()) {
    if (child.key() == name) return torch::nn::Linear(std::dynamic_pointer_cast<torch::nn::LinearImpl>(child.value()));
  }
  return torch::nn::Linear(nullptr);
}

std::vector<at::Tensor> MultiHeadAttentionImpl::split_heads(const at::Tensor& x, int64_t n) const {
  const int64_t b = x.size(0), t = x.size(1), h = options.num_heads();
  if (n == 3 && options.qkv_per_head()) return x.view({b, t, h, n, head_dim_}).permute({3, 0, 2, 1, 4}).unbind(0);
  return x.view({b, t, n, h, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);  // n x (B, H, T, hd)
}

std::vector<at::Tensor> MultiHeadAttentionImpl::project_self(const at::Tensor& x) const {
  const int64_t b = x.size(0), t = x.size(1), h = options.num_heads();
  auto heads_of = [&](const at::Tensor& y, int64_t n) { return y.view({b, t, n, head_dim_}).transpose(1, 2); };
  if (options.separate_qkv()) return {heads_of(linear(q, x), h), heads_of(linear(k, x), kv_heads_), heads_of(linear(v, x), kv_heads_)};
  if (kv_heads_ == h) return split_heads(linear(qkv, x), 3);  // 3 x (B, H, T, hd)
  const auto parts = linear(qkv, x).split_with_sizes({h * head_dim_, kv_heads_ * head_dim_, kv_heads_ * head_dim_}, -1);
  return {heads_of(parts[0], h), heads_of(parts[1], kv_heads_), heads_of(parts[2], kv_heads_)};
}

at::Tensor MultiHeadAttentionImpl::forward(const at::Tensor& x, const AttentionMask& mask, const at::Tensor& memory,
                                           KVCache* cache, const Rotary& rotary) {
  const int64_t b = x.size(0), t = x.size(1), h = options.num_heads();
  at::Tensor qh, kh, vh;
  if (options.cross_attention()) {
    TORCH_CHECK(!rotary.cos.defined(), "cross-attention takes no rotary positions");
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
    auto qkvh = project_self(x);  // (B, H, T, hd), 2 x (B, KV, T, hd)
    qh = qkvh[0], kh = qkvh[1], vh = qkvh[2];
    if (rotary.cos.defined()) qh = apply_rotary(qh, rotary.cos, rotary.sin), kh = apply_rotary(kh, rotary.cos, rotary.sin);
    if (cache) {
      cache->append(kh, vh);  // rotated: a cached key keeps its own position
      kh = cache->key, vh = cache->value;  // (B, KV, T_cached + T, hd)
      if (options.window() > 0) cache->keep_last(options.window() - 1);  // the next query sees these and itself
    }
    if (kv_heads_ != h) {  // each key/value head serves H / KV query heads (HF's repeat_kv)
      const int64_t n = h / kv_heads_, tk = kh.size(2);
      kh = kh.unsqueeze(2).expand({b, kv_heads_, n, tk, head_dim_}).reshape({b, h, tk, head_dim_});
      vh = vh.unsqueeze(2).expand({b, kv_heads_, n, tk, head_dim_}).reshape({b, h, tk, head_dim_});
    }
  }
  const at::Tensor y = kernel_->attend(AttentionInputs{x, qh, kh, vh, mask});  // (B, H, T, hd)
  return linear(out, y.transpose(1, 2).reshape({b, t, inner_dim()}));        // (B, T, D)
}

}  // namespace lmkit::nn
