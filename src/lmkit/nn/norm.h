// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019, T5's
// "T5LayerNorm"), computed in float32 whatever the input dtype: LayerNorm on a
// bf16 input throws in LibTorch 1.13, and T5 computes its variance in fp32.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace lmkit::nn {

enum class NormType { kLayerNorm, kRmsNorm };

struct NormOptions {
  explicit NormOptions(int64_t dim) : dim_(dim) {}
  /// Size of the last dimension.
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(NormType, type) = NormType::kLayerNorm;
  /// Added to the variance (BERT 1e-12, GPT-2 1e-5, T5 1e-6).
  TORCH_ARG(double, eps) = 1e-5;
};

/// LayerNorm: weight · (x − mean) / sqrt(var + eps) + bias.
/// RMSNorm:   weight · x / sqrt(mean(x²) + eps), no mean subtraction, no bias.
class NormImpl : public torch::nn::Module {
 public:
  explicit NormImpl(NormOptions options);
  /// (..., dim) -> (..., dim), float32
  at::Tensor forward(const at::Tensor& x);

  NormOptions options;
  at::Tensor weight;  ///< (dim), ones at init
  at::Tensor bias;    ///< (dim), zeros at init; undefined for RMSNorm
};
TORCH_MODULE(Norm);

}  // namespace lmkit::nn
