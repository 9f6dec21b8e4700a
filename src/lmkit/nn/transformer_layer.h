// One encoder or decoder layer, pre-norm or post-norm:
//   post-norm (Vaswani, BERT): x = Norm(x + Drop(Sublayer(x)))
//   pre-norm (GPT-2, T5):      x = x + Drop(Sublayer(Norm(x)))
// Sublayers: self-attention, then (decoder only) cross-attention over a
// memory, then the feed-forward network.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "lmkit/nn/attention.h"
#include "lmkit/nn/feed_forward.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/nn/norm.h"

namespace lmkit::nn {

struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t d_model, int64_t num_heads, int64_t d_ff)
      : d_model_(d_model), num_heads_(num_heads), d_ff_(d_ff) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(int64_t, d_ff);
  /// Per-head size; 0 means d_model / num_heads (T5: d_kv).
  TORCH_ARG(int64_t, head_dim) = 0;
  TORCH_ARG(Activation, activation) = Activation::kGelu;
  TORCH_ARG(NormType, norm) = NormType::kLayerNorm;
  TORCH_ARG(double, norm_eps) = 1e-5;
  /// Normalise each sublayer's input (true) or the residual sum (false).
  TORCH_ARG(bool, pre_norm) = false;
  /// Biases in attention and feed-forward projections (false for T5).
  TORCH_ARG(bool, bias) = true;
  /// Scale attention scores by 1/sqrt(head_dim) (false for T5).
  TORCH_ARG(bool, scale_scores) = true;
  /// Dropout on each sublayer's output before the residual add.
  TORCH_ARG(double, dropout) = 0.1;
  /// Dropout on attention probabilities.
  TORCH_ARG(double, attention_dropout) = 0.1;
  /// Dropout inside the feed-forward network (T5 only).
  TORCH_ARG(double, ffn_dropout) = 0.0;
  /// Add cross-attention over a memory: a decoder layer of an encoder–decoder model.
  TORCH_ARG(bool, cross_attention) = false;
  /// Causal self-attention: called without a self-attention bias, the layer masks future
  /// keys in the attention kernel (see nn::attention_bias's causal_in_kernel).
  TORCH_ARG(bool, causal) = false;
  TORCH_ARG(AttentionBackend, attention_backend) = AttentionBackend::kAuto;
  /// Self-attention's fused qkv rows grouped by head (MultiHeadAttentionOptions::qkv_per_head).
  TORCH_ARG(bool, qkv_per_head) = false;
  /// Self-attention's kernel and its settings (MultiHeadAttentionOptions::attention, attention_fields,
  /// layer, max_length, shared); cross-attention is full attention.
  TORCH_ARG(std::string, attention) = "full";
  TORCH_ARG(Json, attention_fields) = Json::object();
  TORCH_ARG(int64_t, layer) = 0;
  TORCH_ARG(int64_t, max_length) = 0;
  TORCH_ARG(std::shared_ptr<SharedTensors>, shared) = nullptr;
};

/// Per-layer caches for incremental decoding.
struct LayerCache {
  KVCache self_attn;
  KVCache cross_attn;
};

class TransformerLayerImpl : public torch::nn::Module, public GatedLayer {
 public:
  explicit TransformerLayerImpl(TransformerLayerOptions options);

  /// x (B, T, D) -> (B, T, D).
  ///   self_mask: self-attention's mask (an additive bias: padding / causal / position, see
  ///              attention_bias(); or the keys, global tokens, random blocks a kernel reads).
  ///   memory (B, S, D) and cross_bias: for decoder layers.
  ///   cache: for incremental decoding; x then holds only the new positions.
  at::Tensor forward(const at::Tensor& x, const AttentionMask& self_mask = {}, const at::Tensor& memory = {},
                     const at::Tensor& cross_bias = {}, LayerCache* cache = nullptr);

  /// Pre-norm layers: forward() on a stream whose last residual sum is still pending, returning
  /// this layer's own last sum pending (x + dropout(ffn output)): the stack hands it to the next
  /// layer, whose first norm makes it in the same fused step (models::run_layers).
  PendingSum forward_pending(const PendingSum& x, const AttentionMask& self_mask = {}, const at::Tensor& memory = {},
                             const at::Tensor& cross_bias = {}, LayerCache* cache = nullptr);

  TransformerLayerOptions options;
  MultiHeadAttention self_attn{nullptr};
  Norm self_attn_norm{nullptr};
  MultiHeadAttention cross_attn{nullptr};
  Norm cross_attn_norm{nullptr};
  FeedForward ffn{nullptr};
  Norm ffn_norm{nullptr};
};
TORCH_MODULE(TransformerLayer);

}  // namespace lmkit::nn
