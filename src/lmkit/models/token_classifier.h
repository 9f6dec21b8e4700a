// HF's *ForTokenClassification head, the same in every family (BERT, RoBERTa,
// GPT-2, T5's encoder): dropout on the final hidden states, then one linear layer
// to num_labels per token, named "classifier" in HF's checkpoints ("score" for Llama); the loss is the
// mean cross-entropy over the labelled tokens (-100 ignored).
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/model.h"

namespace lmkit::models {

class TokenClassifierImpl : public torch::nn::Module {
 public:
  TokenClassifierImpl(int64_t hidden_size, int64_t num_labels, double dropout);
  /// out.logits (B, T, num_labels) from hidden (B, T, D); with labels (B, T), out.loss.
  void apply(Output& out, const at::Tensor& hidden, const at::Tensor& labels);
  /// NAME.weight and NAME.bias: "classifier" (BERT, RoBERTa, GPT-2, T5), "score" (Llama).
  void add_hf_tensors(std::vector<HfTensor>& out, const std::string& name = "classifier");

  torch::nn::Linear linear{nullptr};  ///< (num_labels, D)
  double dropout;
};
TORCH_MODULE(TokenClassifier);

/// The labels a token classifier takes: shaped like input_ids, classes in
/// [0, num_labels) or -100; InputError otherwise.
void check_token_labels(const Batch& batch, int64_t num_labels);

}  // namespace lmkit::models
