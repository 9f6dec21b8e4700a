// Full attention: every query sees every key its mask lets through, through
// scaled_dot_product (SDPA: its flash, efficient and cuDNN kernels where they apply).
#include <ATen/ATen.h>

#include <algorithm>

#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"

namespace lmkit::nn {

namespace {

class FullAttention : public AttentionKernel {
 public:
  FullAttention(torch::nn::Module& host, const AttentionSettings& s) : AttentionKernel(host, s) {}

  at::Tensor attend(const AttentionInputs& in) override {
    const at::Tensor &q = in.q, &k = in.k;
    const int64_t tq = q.size(2), tk = k.size(2), window = settings_.window;
    if (varlen_applies(q, k, in.mask)) {  // packed documents, bf16 on a GPU (document_mask)
      return varlen_attention(q, k, in.v, in.mask, settings_.scale, settings_.dropout, training(), settings_.causal,
                              window);
    }
    if (!settings_.causal || in.mask.bias.defined()) {
      return scaled_dot_product(q, k, in.v, additive_bias(in.mask, k.size(0), tk, q.scalar_type()), settings_.scale,
                                settings_.dropout, training(), settings_.backend);
    }
    // A causal layer called without a bias masks future keys itself: a window shorter than the
    // input in O(T·window) where that is the cheaper; in the kernel when nothing else is masked;
    // else through a bias (the real keys, past keys of a cache, a window).
    if (window > 0 && window < tk && tq == tk) {
      return sliding_window_attention(q, k, in.v, in.mask.key_ok, window, settings_.scale, settings_.dropout, training());
    }
    const at::Tensor bias = attention_bias(in.mask.key_ok, true, tq, tk, q.scalar_type(), q.device(), true, window);
    return scaled_dot_product(q, k, in.v, bias, settings_.scale, settings_.dropout, training(), settings_.backend, nullptr,
                              !bias.defined());
  }

  /// A sliding window's query sees at most `window` keys.
  double flops_per_token(int64_t keys) const override {
    return AttentionKernel::flops_per_token(settings_.window > 0 ? std::min(keys, settings_.window) : keys);
  }
};

}  // namespace

AttentionSpec full_attention() {
  AttentionSpec s;
  s.name = "full";
  s.summary = "softmax(QKᵀ/√d + bias)·V over every key (SDPA; flash/cuDNN on a GPU)";
  s.cross = true;
  s.window = true;
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<FullAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
