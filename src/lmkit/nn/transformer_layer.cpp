#include "lmkit/nn/transformer_layer.h"

#include <ATen/ATen.h>

#include "lmkit/nn/fused.h"

namespace lmkit::nn {

TransformerLayerImpl::TransformerLayerImpl(TransformerLayerOptions options_) : options(std::move(options_)) {
  const auto& o = options;
  auto attention = [&](bool cross) {
    return MultiHeadAttention(MultiHeadAttentionOptions(o.d_model(), o.num_heads())
                                  .head_dim(o.head_dim())
                                  .cross_attention(cross)
                                  .bias(o.bias())
                                  .scale_scores(o.scale_scores())
                                  .dropout(o.attention_dropout())
                                  .causal(o.causal() && !cross)
                                  .backend(o.attention_backend())
                                  .qkv_per_head(o.qkv_per_head() && !cross)
                                  .attention(cross ? "full" : o.attention())
                                  .attention_fields(cross ? Json::object() : o.attention_fields())
                                  .layer(o.layer())
                                  .max_length(o.max_length())
                                  .shared(o.shared()));
  };
  auto norm = [&] { return Norm(NormOptions(o.d_model()).type(o.norm()).eps(o.norm_eps())); };
  self_attn = register_module("self_attn", attention(false));
  self_attn_norm = register_module("self_attn_norm", norm());
  if (o.cross_attention()) {
    cross_attn = register_module("cross_attn", attention(true));
    cross_attn_norm = register_module("cross_attn_norm", norm());
  }
  ffn = register_module("ffn", FeedForward(FeedForwardOptions(o.d_model(), o.d_ff())
                                               .activation(o.activation())
                                               .bias(o.bias())
                                               .dropout(o.ffn_dropout())));
  ffn_norm = register_module("ffn_norm", norm());
}

at::Tensor TransformerLayerImpl::forward(const at::Tensor& x, const AttentionMask& self_mask, const at::Tensor& memory,
                                         const at::Tensor& cross_bias, LayerCache* cache) {
  if (options.pre_norm()) return forward_pending({x, {}, 0.0}, self_mask, memory, cross_bias, cache).sum();
  // Post-LN (Vaswani, BERT): norm(x + dropout(sublayer(x))), one fused step each.
  const double p = options.dropout();
  const bool training = is_training();
  at::Tensor h = residual_norm(x, self_attn(x, self_mask, at::Tensor(), cache ? &cache->self_attn : nullptr), p,
                               training, self_attn_norm).second;
  if (options.cross_attention()) {
    h = residual_norm(h, cross_attn(h, cross_bias, memory, cache ? &cache->cross_attn : nullptr), p, training,
                      cross_attn_norm).second;
  }
  return residual_norm(h, ffn(h), p, training, ffn_norm).second;  // (B, T, D)
}

PendingSum TransformerLayerImpl::forward_pending(const PendingSum& x, const AttentionMask& self_mask,
                                                 const at::Tensor& memory, const at::Tensor& cross_bias,
                                                 LayerCache* cache) {
  TORCH_CHECK(options.pre_norm(), "forward_pending: a post-norm layer normalises its own sums");
  // Pre-LN (GPT-2, T5): x + dropout(sublayer(norm(x))). Each residual sum and the norm after it
  // are one fused step: the pending sum and self_attn_norm, the attention's sum and the next
  // norm; the FFN's sum is left pending for the next layer (or the stack's final norm). Each
  // norm's output feeds only linear projections (feeds_linear: bf16 under autocast).
  const double p = is_training() ? options.dropout() : 0.0;
  auto [s, normed] = residual_norm(x, self_attn_norm, true);
  at::Tensor h;
  std::tie(h, normed) = residual_norm(s, self_attn(normed, self_mask, at::Tensor(), cache ? &cache->self_attn : nullptr),
                                      p, p > 0, options.cross_attention() ? cross_attn_norm : ffn_norm, true);
  if (options.cross_attention()) {
    std::tie(h, normed) = residual_norm(h, cross_attn(normed, cross_bias, memory, cache ? &cache->cross_attn : nullptr),
                                        p, p > 0, ffn_norm, true);
  }
  return {h, ffn(normed), p};  // (B, T, D) each
}

}  // namespace lmkit::nn
