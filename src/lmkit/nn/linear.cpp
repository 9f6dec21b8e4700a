#include "lmkit/nn/linear.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

namespace lmkit::nn {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool single_row = x.dim() >= 1 && x.numel() == x.size(-1);
  if (single_row && x.device().is_cpu() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
      !at::autocast::is_autocast_enabled(at::kCPU)) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    at::Tensor y = bias.defined() ? at::addmv(bias, weight, x.reshape({-1})) : at::mv(weight, x.reshape({-1}));
    return y.view(shape);
  }
  return at::linear(x, weight, bias);
}

at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x) { return linear(x, layer->weight, layer->bias); }

}  // namespace lmkit::nn
