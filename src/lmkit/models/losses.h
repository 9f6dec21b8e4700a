// The losses the model heads share, and the target selection that keeps the
// vocabulary projection to the positions that carry a loss.
#pragma once

#include <functional>
#include <utility>

#include <ATen/core/Tensor.h>

#include "lmkit/models/model.h"

namespace lmkit::models {

/// Mean cross-entropy over targets != -100 (HF's CrossEntropyLoss(ignore_index=-100)).
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, double label_smoothing = 0.0);

/// cross_entropy(hidden·weightᵀ + bias, targets, label_smoothing) without ever holding the
/// (N, V) logits: the rows go through in chunks of at most `chunk_elements` logits, and
/// since the loss is a scalar, each chunk's gradients with respect to hidden, weight and
/// bias are computed right there (backward only scales them). Peak memory is one chunk's
/// logits instead of N·V floats three times over (logits, their fp32 copy, log-softmax).
/// Under autocast the matmuls run in its dtype and the softmax in float32, as at::linear
/// followed by cross_entropy would. hidden (N, D), weight (V, D), bias (V) or undefined,
/// targets (N) with -100 ignored; no targets: 0. No host synchronisation.
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& targets, double label_smoothing = 0.0,
                                int64_t chunk_elements = int64_t{1} << 26);

/// Sequence-classification loss: cross-entropy over class ids, or MSE against
/// float targets when the head has one output (regression, HF's convention).
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels);

/// Rows of `hidden` (B, T, D) at positions where `labels` (B, T) != -100, as (N, D),
/// and the matching labels (N): the vocabulary projection then runs only where a loss is taken.
/// N is rounded up (by at most 1/16, to a multiple of a power of two >= 8) with copies
/// of row 0 labelled -100, which cross_entropy ignores: the masked-LM count changes
/// every batch, and a few sizes per octave keep the allocator's heap from growing
/// over a long run (lmkit-bench train's heap figures).
std::pair<at::Tensor, at::Tensor> select_targets(const at::Tensor& hidden, const at::Tensor& labels);

/// A vocabulary head on out.last_hidden_state (B, T, D) against token labels (B, T), unshifted
/// (−100: none): out.logits = transform(hidden)·weightᵀ + bias when `full_logits` or without
/// labels; with labels out.loss, from those logits, or else from the labelled rows alone
/// (select_targets, then linear_cross_entropy). An empty `transform` is the identity.
void vocabulary_head(Output& out, const at::Tensor& labels, bool full_logits,
                     const std::function<at::Tensor(const at::Tensor&)>& transform, const at::Tensor& weight,
                     const at::Tensor& bias, double label_smoothing = 0.0);

}  // namespace lmkit::models
