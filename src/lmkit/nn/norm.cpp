#include "lmkit/nn/norm.h"

#include <ATen/ATen.h>

#include "lmkit/nn/fused.h"

namespace lmkit::nn {

NormImpl::NormImpl(NormOptions options_) : options(std::move(options_)) {
  weight = register_parameter("weight", at::ones({options.dim()}));
  if (options.type() == NormType::kLayerNorm) bias = register_parameter("bias", at::zeros({options.dim()}));
}

at::Tensor NormImpl::forward(const at::Tensor& x) {
  // float32 on the CPU: one pass a row (nn/fused.h), the residual step's row math.
  if (at::Tensor y = norm_cpu(x, weight, bias, options.eps()); y.defined()) return y;
  // In float32 at least (bf16 inputs are upcast; float64, as gradient checks run, stays).
  at::Tensor xf = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  // bf16 weights (--dtype bf16-weights) are applied in float32 too.
  const at::Tensor w = weight.to(xf.scalar_type());
  if (options.type() == NormType::kLayerNorm) {
    return at::layer_norm(xf, {options.dim()}, w, bias.to(xf.scalar_type()), options.eps());
  }
  at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);  // (..., 1)
  return w * (xf * at::rsqrt(variance + options.eps()));
}

}  // namespace lmkit::nn
