// Position information: sinusoidal (Vaswani et al. 2017, §3.5), learned
// (BERT, GPT-2), T5's bucketed relative position bias (Raffel et al. 2020),
// rotary positions (Su et al. 2021: Llama, Mistral) and ALiBi (Press et al. 2022: BLOOM).
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

namespace lmkit::nn {

/// (length, dim) table with PE[pos, 2i] = sin(pos / 10000^(2i/dim)) and
/// PE[pos, 2i+1] = cos(pos / 10000^(2i/dim)), computed in float64, returned as float32.
at::Tensor sinusoidal_table(int64_t length, int64_t dim);

/// A table of absolute positions (max_length, dim): learned (BERT's position_embeddings,
/// GPT-2's wpe), a parameter "weight" drawn from N(0, 0.02); or fixed sinusoidal positions
/// (the Transformer's), a non-trainable buffer "table".
class PositionTableImpl : public torch::nn::Module {
 public:
  PositionTableImpl(int64_t max_length, int64_t dim, bool learned);
  /// Positions offset .. offset+length-1: (length, dim). Throws past max_length.
  at::Tensor forward(int64_t length, int64_t offset = 0);
  /// The rows position_ids (B, T) names: (B, T, dim) (packed documents' restarting positions).
  at::Tensor at(const at::Tensor& position_ids);
  at::Tensor weight;  ///< (max_length, dim)
};

struct SinusoidalPositionsImpl : PositionTableImpl {
  SinusoidalPositionsImpl(int64_t max_length, int64_t dim) : PositionTableImpl(max_length, dim, false) {}
};
TORCH_MODULE(SinusoidalPositions);

struct LearnedPositionsImpl : PositionTableImpl {
  LearnedPositionsImpl(int64_t max_length, int64_t dim) : PositionTableImpl(max_length, dim, true) {}
};
TORCH_MODULE(LearnedPositions);

/// T5's bucket for each relative position (key − query), exactly as HF's
/// `T5Attention._relative_position_bucket`: half the buckets are exact
/// distances, the rest grow logarithmically up to max_distance; bidirectional
/// halves the buckets between the two directions, causal sees only the past.
at::Tensor relative_position_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                                    int64_t max_distance);

struct RelativePositionBiasOptions {
  explicit RelativePositionBiasOptions(int64_t num_heads) : num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_heads);
  /// Encoder: true; decoder self-attention: false.
  TORCH_ARG(bool, bidirectional) = true;
  TORCH_ARG(int64_t, num_buckets) = 32;
  TORCH_ARG(int64_t, max_distance) = 128;
};

/// A learned scalar per (bucket, head), added to attention scores.
class RelativePositionBiasImpl : public torch::nn::Module {
 public:
  explicit RelativePositionBiasImpl(RelativePositionBiasOptions options);
  /// (1, H, q_len, k_len) for queries at positions k_len−q_len .. k_len−1
  /// (the last q_len of k_len positions, as during cached decoding); contiguous.
  at::Tensor forward(int64_t q_len, int64_t k_len);

  RelativePositionBiasOptions options;
  torch::nn::Embedding embedding{nullptr};  ///< weight (num_buckets, H)
};
TORCH_MODULE(RelativePositionBias);

/// cos and sin (1, 1, T, head_dim) of rotary positions past .. past + T − 1, in float32
/// as HF computes them: angle_i = position · θ^(−2i/head_dim), the halves concatenated.
std::pair<at::Tensor, at::Tensor> rotary_cos_sin(int64_t past, int64_t t, int64_t head_dim, double theta, at::Device device);

/// As above for each token's own position, position_ids (B, T) (HF's): cos and sin (B, 1, T, head_dim).
std::pair<at::Tensor, at::Tensor> rotary_cos_sin(const at::Tensor& position_ids, int64_t head_dim, double theta,
                                                 at::Device device);

/// x·cos + rotate_half(x)·sin, rotate_half(x) = [−x₂, x₁] (HF's apply_rotary_pos_emb).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// ALiBi's slope of each of `heads` heads (float32, as HF's build_alibi_tensor): the
/// geometric sequence 2^(−8/n·i), i = 1..n, for the largest power of two n ≤ heads,
/// then every other slope of the sequence for 2n for the heads beyond it.
at::Tensor alibi_slopes(int64_t heads);

/// ALiBi's bias (B|1, H, 1, Tk): slope_h · position of key k, where a key's position
/// counts the real tokens before it (HF: (cumsum(mask) − 1) · mask; arange without a
/// mask). Added to every query's scores, it is −slope_h · distance up to a constant per
/// row, which softmax removes.
at::Tensor alibi_bias(const at::Tensor& slopes, const at::Tensor& key_padding_mask, int64_t k_len, at::ScalarType dtype,
                      at::Device device);

}  // namespace lmkit::nn
