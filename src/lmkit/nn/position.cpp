#include "lmkit/nn/position.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/nn/fused.h"

namespace lmkit::nn {

at::Tensor sinusoidal_table(int64_t length, int64_t dim) {
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor pos = at::arange(length, opts).unsqueeze(1);                         // (L, 1)
  at::Tensor two_i = at::arange(0, dim, 2, opts);                                 // (ceil(D/2))
  at::Tensor angle = pos / at::pow(10000.0, two_i / static_cast<double>(dim));    // (L, ceil(D/2))
  at::Tensor table = at::zeros({length, dim}, opts);
  table.slice(1, 0, dim, 2).copy_(at::sin(angle));
  table.slice(1, 1, dim, 2).copy_(at::cos(angle).slice(1, 0, dim / 2));
  return table.to(at::kFloat);
}

namespace {
void check_range(int64_t length, int64_t offset, int64_t max_length) {
  if (offset + length > max_length) {
    throw InputError("sequence of " + std::to_string(offset + length) + " positions exceeds the model's " +
                     std::to_string(max_length) + " (max_position_embeddings)");
  }
}
}  // namespace

PositionTableImpl::PositionTableImpl(int64_t max_length, int64_t dim, bool learned) {
  weight = learned ? register_parameter("weight", at::randn({max_length, dim}) * 0.02)
                   : register_buffer("table", sinusoidal_table(max_length, dim));
}

at::Tensor PositionTableImpl::forward(int64_t length, int64_t offset) {
  check_range(length, offset, weight.size(0));
  return weight.slice(0, offset, offset + length);
}

at::Tensor PositionTableImpl::at(const at::Tensor& position_ids) {
  // Range-checked by the model (check_position_ids); an embedding lookup, so the gradient reaches the table.
  return at::embedding(weight, position_ids.to(weight.device()));
}

at::Tensor relative_position_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance) {
  at::Tensor rel = relative_position.to(at::kLong);
  at::Tensor buckets = at::zeros_like(rel);
  at::Tensor n;
  if (bidirectional) {
    num_buckets /= 2;
    buckets = buckets + rel.gt(0).to(at::kLong) * num_buckets;
    n = rel.abs();
  } else {
    n = -at::minimum(rel, at::zeros_like(rel));
  }
  const int64_t max_exact = num_buckets / 2;
  // float32 log, then truncation toward zero, as in HF (the fixtures tabulate it).
  at::Tensor large = at::log(n.to(at::kFloat) / static_cast<double>(max_exact)) /
                     std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                     static_cast<double>(num_buckets - max_exact);
  large = large.to(at::kLong) + max_exact;
  large = at::minimum(large, at::full_like(large, num_buckets - 1));
  return buckets + at::where(n.lt(max_exact), n, large);
}

RelativePositionBiasImpl::RelativePositionBiasImpl(RelativePositionBiasOptions options_) : options(std::move(options_)) {
  embedding = register_module("embedding", torch::nn::Embedding(options.num_buckets(), options.num_heads()));
}

at::Tensor RelativePositionBiasImpl::forward(int64_t q_len, int64_t k_len) {
  auto opts = at::TensorOptions().dtype(at::kLong).device(embedding->weight.device());
  at::Tensor query_pos = at::arange(k_len - q_len, k_len, opts).unsqueeze(1);  // (q, 1)
  at::Tensor key_pos = at::arange(k_len, opts).unsqueeze(0);                   // (1, k)
  at::Tensor buckets = relative_position_bucket(key_pos - query_pos, options.bidirectional(), options.num_buckets(),
                                                options.max_distance());  // (q, k)
  // Contiguous once here, not in every layer: the fused attention kernels need the keys
  // dense, and the permuted view (keys strided by H) sent T5's attention on a GPU to the
  // float32 math fallback.
  return embedding(buckets).permute({2, 0, 1}).contiguous().unsqueeze(0);  // (1, H, q, k)
}

std::pair<at::Tensor, at::Tensor> rotary_cos_sin(int64_t past, int64_t t, int64_t head_dim, double theta, at::Device device) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  // HF: 1 / theta ** (arange(0, d, 2).float() / d), in float32.
  const at::Tensor inv_freq = at::pow(at::full({}, theta, f32), at::arange(0, head_dim, 2, f32) / static_cast<double>(head_dim)).reciprocal();
  const at::Tensor positions = at::arange(past, past + t, f32);
  const at::Tensor freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // (T, d/2)
  const at::Tensor angles = at::cat({freqs, freqs}, -1).view({1, 1, t, head_dim});
  return {angles.cos(), angles.sin()};
}

std::pair<at::Tensor, at::Tensor> rotary_cos_sin(const at::Tensor& position_ids, int64_t head_dim, double theta,
                                                 at::Device device) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor inv_freq = at::pow(at::full({}, theta, f32), at::arange(0, head_dim, 2, f32) / static_cast<double>(head_dim)).reciprocal();
  const at::Tensor positions = position_ids.to(device).to(at::kFloat);  // (B, T)
  const at::Tensor freqs = positions.unsqueeze(-1) * inv_freq;  // (B, T, d/2)
  const at::Tensor angles = at::cat({freqs, freqs}, -1).unsqueeze(1);  // (B, 1, T, d)
  return {angles.cos(), angles.sin()};
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (at::Tensor out = rotary_cpu(x, cos, sin); out.defined()) return out;  // one pass, the same bits
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({x.slice(-1, half).neg(), x.slice(-1, 0, half)}, -1);
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

at::Tensor alibi_slopes(int64_t heads) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const int64_t n = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
  // HF: base = 2^(−2^−(log2(n) − 3)), in float32; slopes = base^[1..n].
  auto powers_of = [&](double base, int64_t first, int64_t end, int64_t step) {
    return at::pow(at::full({}, base, f32), at::arange(first, end, step, at::kInt));
  };
  at::Tensor slopes = powers_of(std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3))), 1, 1 + n, 1);
  if (n != heads) {
    const int64_t extra = std::min(n, heads - n);
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * n)) - 3)));
    slopes = at::cat({slopes, powers_of(base, 1, 1 + 2 * extra, 2)});
  }
  return slopes;
}

at::Tensor alibi_bias(const at::Tensor& slopes, const at::Tensor& key_padding_mask, int64_t k_len, at::ScalarType dtype,
                      at::Device device) {
  at::Tensor positions;  // (B|1, Tk)
  if (key_padding_mask.defined()) {
    const at::Tensor m = key_padding_mask.to(device).to(at::kLong);
    positions = (m.cumsum(-1) - 1) * m;
  } else {
    positions = at::arange(k_len, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(0);
  }
  const at::Tensor s = slopes.to(device).view({1, -1, 1, 1});
  return (s * positions.unsqueeze(1).unsqueeze(1).to(at::kFloat)).to(dtype);  // (B|1, H, 1, Tk)
}

}  // namespace lmkit::nn
