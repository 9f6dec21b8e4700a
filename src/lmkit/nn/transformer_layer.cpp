#include "lmkit/nn/transformer_layer.h"

#include <ATen/ATen.h>

#include "lmkit/nn/dropout.h"

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
                                  .qkv_per_head(o.qkv_per_head() && !cross));
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

at::Tensor TransformerLayerImpl::residual(const at::Tensor& x, Norm& norm,
                                          const std::function<at::Tensor(const at::Tensor&)>& sublayer) {
  const double p = is_training() ? options.dropout() : 0.0;
  if (options.pre_norm()) {
    at::Tensor h = sublayer(norm(x));
    return x + (p > 0 ? nn::dropout(h, p, true) : h);
  }
  at::Tensor h = sublayer(x);
  return norm(x + (p > 0 ? nn::dropout(h, p, true) : h));
}

at::Tensor TransformerLayerImpl::forward(const at::Tensor& x, const at::Tensor& self_bias, const at::Tensor& memory,
                                         const at::Tensor& cross_bias, LayerCache* cache) {
  at::Tensor h = residual(x, self_attn_norm, [&](const at::Tensor& in) {
    return self_attn(in, self_bias, at::Tensor(), cache ? &cache->self_attn : nullptr);
  });
  if (options.cross_attention()) {
    h = residual(h, cross_attn_norm, [&](const at::Tensor& in) {
      return cross_attn(in, cross_bias, memory, cache ? &cache->cross_attn : nullptr);
    });
  }
  return residual(h, ffn_norm, [&](const at::Tensor& in) { return ffn(in); });  // (B, T, D)
}

}  // namespace lmkit::nn
