#include "lmkit/nn/transformer_layer.h"

#include <ATen/ATen.h>

#include "lmkit/nn/dropout.h"
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
  auto self_block = [&](const at::Tensor& in) {
    return self_attn(in, self_mask, at::Tensor(), cache ? &cache->self_attn : nullptr);
  };
  auto cross_block = [&](const at::Tensor& in) {
    return cross_attn(in, cross_bias, memory, cache ? &cache->cross_attn : nullptr);
  };
  const double p = options.dropout();
  const bool training = is_training();
  if (!options.pre_norm()) {
    // Post-LN (Vaswani et al., BERT): norm(x + dropout(sublayer(x))), one fused step each.
    at::Tensor h = residual_norm(x, self_block(x), p, training, self_attn_norm).second;
    if (options.cross_attention()) h = residual_norm(h, cross_block(h), p, training, cross_attn_norm).second;
    return residual_norm(h, ffn(h), p, training, ffn_norm).second;  // (B, T, D)
  }
  // Pre-LN (GPT-2, T5): x + dropout(sublayer(norm(x))); the sum and the next sublayer's norm
  // are one fused step, the last sum a plain one (the next layer normalises it).
  auto [h, normed] = residual_norm(x, self_block(self_attn_norm(x)), p, training,
                                   options.cross_attention() ? cross_attn_norm : ffn_norm);
  if (options.cross_attention()) std::tie(h, normed) = residual_norm(h, cross_block(normed), p, training, ffn_norm);
  const at::Tensor f = ffn(normed);
  return h + (training && p > 0 ? nn::dropout(f, p, true) : f);  // (B, T, D)
}

}  // namespace lmkit::nn
