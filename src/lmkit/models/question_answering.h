// HF's *ForQuestionAnswering heads (extractive QA, SQuAD): a linear layer to two outputs per
// token on the final hidden states, split into start and end logits (qa_outputs); BigBird's
// puts BigBirdForQuestionAnsweringHead's dropout, intermediate and output block (a feed-forward
// with a residual LayerNorm) before it and takes the question's tokens out of the competition.
// The loss is HF's: each row's start and end positions clamped to [0, T], T ignored, the mean
// of the two cross-entropies.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/feed_forward.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

struct QuestionAnsweringOptions {
  int64_t hidden_size = 0;
  /// BigBird's head: dropout, dense to intermediate_size, activation, dense back, dropout,
  /// LayerNorm of the sum with its input; 0 for BERT's, RoBERTa's and Longformer's plain linear.
  int64_t intermediate_size = 0;
  nn::Activation activation = nn::Activation::kGelu;
  double dropout = 0.0;
  double layer_norm_eps = 1e-12;
};

class QuestionAnsweringHeadImpl : public torch::nn::Module {
 public:
  explicit QuestionAnsweringHeadImpl(const QuestionAnsweringOptions& options);
  /// out.named's start_logits and end_logits (B, T) and out.logits (B, T, 2) from hidden
  /// (B, T, D); `question` (B, T), when defined, marks tokens whose logits lose 1e6 (BigBird's
  /// question mask); with `start` and `end` (B), out.loss.
  void apply(Output& out, const at::Tensor& hidden, const at::Tensor& question, const at::Tensor& start,
             const at::Tensor& end);
  /// HF's names: "qa_outputs", or BigBird's "qa_classifier.{intermediate.dense,output.dense,output.LayerNorm,qa_outputs}".
  void add_hf_tensors(std::vector<HfTensor>& out);
  /// Multiply–adds per token, times two.
  double flops_per_token() const;

  QuestionAnsweringOptions options;
  torch::nn::Linear intermediate{nullptr}, output{nullptr};  ///< BigBird's block
  nn::Norm norm{nullptr};
  torch::nn::Linear qa_outputs{nullptr};  ///< (2, D)
};
TORCH_MODULE(QuestionAnsweringHead);

/// The answer positions a question-answering head takes from Batch::extra: both or neither,
/// each (B) int64 and >= 0 (InputError naming the input otherwise; past the row is allowed,
/// and ignored, as HF's).
void check_answer_positions(const Batch& batch);

/// HF's BigBirdForQuestionAnswering question mask: 1 for the tokens before and at each
/// row's first `sep` (argmax of input_ids == sep, plus one; a row without one masks its first
/// token only), (B, T) int64. BigBird's token types when none are given are 1 less it; its
/// logits mask is it with the first column cleared ([CLS] stays a candidate: no answer).
at::Tensor question_tokens(const at::Tensor& input_ids, int64_t sep);

/// HF's LongformerForQuestionAnswering global attention: 1 for the tokens before each row's
/// first `sep` (the question), (B, T) int64. A row without `sep` is an InputError asking
/// for a global_attention_mask.
at::Tensor question_global_attention(const at::Tensor& input_ids, int64_t sep);

}  // namespace lmkit::models
