// SpanBERT's span boundary objective (Joshi et al. 2020, §3.2): each token x_i of
// a masked span x_s..x_e is predicted from the encoder outputs at the two tokens
// around the span, x_{s-1} and x_{e+1}, and a relative position embedding p_{i-s},
// through a two-layer feed-forward network (GELU, LayerNorm after each layer)
// into the model's tied vocabulary projection, as SpanBERT's
// BertPairTargetPredictionHead does. The spans are the runs of labelled positions:
// span masking (data/masking.h) leaves an unmasked token between any two spans, so
// the model derives them from the labels alone and the batch needs no extra field.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/feed_forward.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

/// The positions the span boundary objective predicts, flattened over (B, T):
/// the labelled positions with an unlabelled position on either side of their run
/// and at most `max_targets` - 1 after the run's start (SpanBERT predicts the first
/// max_targets tokens of a span).
struct SpanTargets {
  at::Tensor index;     ///< (N) b·T + i of each predicted token
  at::Tensor left;      ///< (N) b·T + s − 1: the token before its span
  at::Tensor right;     ///< (N) b·T + e + 1: the token after its span
  at::Tensor relative;  ///< (N) i − s
  at::Tensor labels;    ///< (N) the original tokens
};

/// The spans of `labels` (B, T) (−100: not a target), found with cumulative maxima:
/// no host loop, one synchronisation (the count).
SpanTargets span_targets(const at::Tensor& labels, int64_t max_targets);
/// How many positions span_targets selects (0 for undefined labels).
int64_t count_span_targets(const at::Tensor& labels, int64_t max_targets);

struct SpanBoundaryOptions {
  int64_t hidden_size = 768;
  int64_t vocab_size = 30522;
  int64_t max_targets = 20;       ///< relative positions (SpanBERT's max_pair_targets)
  int64_t position_size = 200;    ///< width of the position embedding (SpanBERT's)
  nn::Activation activation = nn::Activation::kGelu;
  double norm_eps = 1e-12;
};

class SpanBoundaryHeadImpl : public torch::nn::Module {
 public:
  explicit SpanBoundaryHeadImpl(const SpanBoundaryOptions& options);

  /// The representation each target is predicted from: (N, D) for `targets` of `hidden` (B, T, D).
  at::Tensor forward(const at::Tensor& hidden, const SpanTargets& targets);
  /// Adds the term "sbo" (the mean cross-entropy of its targets through the tied
  /// `decoder` (V, D) and this head's bias; 0 with no target) to out.terms and out.loss.
  void add_term(Output& out, const at::Tensor& hidden, const at::Tensor& labels, const at::Tensor& decoder);
  /// Its HF tensors under `prefix` (SpanBERT's names: position_embeddings, mlp_layer_norm.*, bias).
  void add_hf_tensors(std::vector<HfTensor>& out, const std::string& prefix);
  /// Forward FLOPs per target.
  double flops_per_target() const;

  SpanBoundaryOptions options;
  torch::nn::Embedding positions{nullptr};  ///< (max_targets, position_size)
  torch::nn::Linear first{nullptr};         ///< (2D + position_size) -> D
  nn::Norm first_norm{nullptr};
  torch::nn::Linear second{nullptr};        ///< D -> D
  nn::Norm second_norm{nullptr};
  at::Tensor bias;                          ///< (V) output bias (the decoder weight is the embeddings')
};
TORCH_MODULE(SpanBoundaryHead);

}  // namespace lmkit::models
