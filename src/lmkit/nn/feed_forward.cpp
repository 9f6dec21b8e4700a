#include "lmkit/nn/feed_forward.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/linear.h"

namespace lmkit::nn {

const NameTable<Activation>& activation_names() {
  // The first name of each value is how lmkit writes it; the others are HF's aliases.
  static const NameTable<Activation> table{"activation", {{"relu", Activation::kRelu},
                                                          {"gelu", Activation::kGelu},
                                                          {"gelu_new", Activation::kGeluTanh},
                                                          {"gelu_pytorch_tanh", Activation::kGeluTanh},
                                                          {"gelu_tanh", Activation::kGeluTanh},
                                                          {"gated-gelu", Activation::kGatedGelu},
                                                          {"gated_gelu", Activation::kGatedGelu}}};
  return table;
}

Activation parse_activation(const std::string& name) { return activation_names().parse(name); }

std::string activation_name(Activation activation) { return activation_names().name(activation); }

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
  at::Tensor h;
  if (options.activation() == Activation::kGatedGelu) {
    auto branches = linear(in, x).chunk(2, -1);  // gate, linear: 2 x (B, T, d_ff)
    h = at::gelu(branches[0], "tanh") * branches[1];
  } else if (options.activation() == Activation::kGelu || options.activation() == Activation::kGeluTanh) {
    h = linear_gelu(in, x, options.activation() == Activation::kGeluTanh);  // (B, T, d_ff)
  } else {
    h = activate(linear(in, x), options.activation());  // (B, T, d_ff)
  }
  if (options.dropout() > 0 && is_training()) h = nn::dropout(h, options.dropout(), true);
  return linear(out, h);  // (B, T, D)
}

}  // namespace lmkit::nn
