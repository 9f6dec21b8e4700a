// x·Wᵀ + b for the model's projections, with a fast path for decoding.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

namespace lmkit::nn {

/// As at::linear. A single row (one new token of one sequence, as in KV-cache
/// decoding) in float32 on CPU is a matrix–vector product instead: OpenBLAS's
/// GEMM packs the whole weight on every call, which made the packing copies,
/// not the arithmetic, most of the time per generated token.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = at::Tensor());

/// linear() with a torch::nn::Linear's weight and bias.
at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x);

}  // namespace lmkit::nn
