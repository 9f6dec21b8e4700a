// Full attention: every query sees every key its mask lets through, through
// scaled_dot_product (SDPA: its flash, efficient and cuDNN kernels where they apply).
#include <ATen/ATen.h>

#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"

namespace lmkit::nn {

namespace {

class FullAttention : public AttentionKernel {
 public:
  FullAttention(torch::nn::Module& host, const AttentionSettings& s) : AttentionKernel(host, s) {}

  at::Tensor attend(const AttentionInputs& in) override {
    const at::Tensor &q = in.q, &k = in.k;
    at::Tensor bias = additive_bias(in.mask, k.size(0), k.size(2), q.scalar_type());
    // A causal layer called without a bias masks in the kernel; past keys (a cache) need the bias.
    bool in_kernel = false;
    if (settings_.causal && !bias.defined()) {
      in_kernel = q.size(2) == k.size(2);
      if (!in_kernel) bias = attention_bias({}, true, q.size(2), k.size(2), q.scalar_type(), q.device());
    }
    return scaled_dot_product(q, k, in.v, bias, settings_.scale, settings_.dropout, training(), settings_.backend, nullptr,
                              in_kernel);
  }
};

}  // namespace

AttentionSpec full_attention() {
  AttentionSpec s;
  s.name = "full";
  s.summary = "softmax(QKᵀ/√d + bias)·V over every key (SDPA; flash/cuDNN on a GPU)";
  s.cross = true;
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<FullAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
