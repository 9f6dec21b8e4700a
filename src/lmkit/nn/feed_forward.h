// Position-wise feed-forward network: out(act(in(x))), or the gated form of
// T5 v1.1 / Shazeer 2020: out(gelu(x·W0) ⊙ x·W1).
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace lmkit::nn {

enum class Activation {
  kRelu,       ///< Vaswani et al., T5 v1.0
  kGelu,       ///< exact erf GELU (BERT's "gelu")
  kGeluTanh,   ///< tanh approximation (GPT-2's "gelu_new")
  kGatedGelu,  ///< tanh GELU gate times a linear branch (T5 v1.1 "gated-gelu")
};

/// Parses HF spellings: relu, gelu, gelu_new, gelu_pytorch_tanh, gated-gelu. Throws InputError otherwise.
Activation parse_activation(const std::string& name);
/// The HF spelling written to config.json.
std::string activation_name(Activation activation);
/// Applies a non-gated activation elementwise.
at::Tensor activate(const at::Tensor& x, Activation activation);

struct FeedForwardOptions {
  FeedForwardOptions(int64_t d_model, int64_t d_ff) : d_model_(d_model), d_ff_(d_ff) {}
  /// Input and output width.
  TORCH_ARG(int64_t, d_model);
  /// Hidden width (per branch for the gated form).
  TORCH_ARG(int64_t, d_ff);
  TORCH_ARG(Activation, activation) = Activation::kGelu;
  /// Biases on both projections (false for T5).
  TORCH_ARG(bool, bias) = true;
  /// Dropout on the hidden activations (T5 only; BERT and GPT-2 have none there).
  TORCH_ARG(double, dropout) = 0.0;
};

class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(FeedForwardOptions options);
  /// (B, T, D) -> (B, T, D)
  at::Tensor forward(const at::Tensor& x);

  FeedForwardOptions options;
  /// weight (d_ff, D), or (2·d_ff, D) for the gated form: [gate W0; linear W1].
  torch::nn::Linear in{nullptr};
  /// weight (D, d_ff)
  torch::nn::Linear out{nullptr};
};
TORCH_MODULE(FeedForward);

}  // namespace lmkit::nn
