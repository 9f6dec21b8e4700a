#include "lmkit/nn/feed_forward.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::nn {

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_tanh") return Activation::kGeluTanh;
  if (name == "gated-gelu" || name == "gated_gelu") return Activation::kGatedGelu;
  throw InputError("unknown activation '" + name + "' (expected relu, gelu, gelu_new or gated-gelu)");
}

std::string activation_name(Activation activation) {
  switch (activation) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_new";
    case Activation::kGatedGelu: return "gated-gelu";
  }
  return "?";
}

at::Tensor activate(const at::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::kRelu: return at::relu(x);
    case Activation::kGelu: return at::gelu(x);
    case Activation::kGeluTanh: return at::gelu(x, "tanh");
    case Activation::kGatedGelu: break;
  }
  throw RuntimeError("activate(): the gated activation needs two branches");
}

FeedForwardImpl::FeedForwardImpl(FeedForwardOptions options_) : options(std::move(options_)) {
  const bool gated = options.activation() == Activation::kGatedGelu;
  const int64_t hidden = gated ? 2 * options.d_ff() : options.d_ff();
  in = register_module("in", torch::nn::Linear(torch::nn::LinearOptions(options.d_model(), hidden).bias(options.bias())));
  out = register_module("out",
                        torch::nn::Linear(torch::nn::LinearOptions(options.d_ff(), options.d_model()).bias(options.bias())));
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  at::Tensor h = linear(in, x);  // (B, T, d_ff) or (B, T, 2·d_ff)
  if (options.activation() == Activation::kGatedGelu) {
    auto branches = h.chunk(2, -1);  // gate, linear: 2 x (B, T, d_ff)
    h = at::gelu(branches[0], "tanh") * branches[1];
  } else {
    h = activate(h, options.activation());
  }
  if (options.dropout() > 0 && is_training()) h = nn::dropout(h, options.dropout(), true);
  return linear(out, h);  // (B, T, D)
}

}  // namespace lmkit::nn
