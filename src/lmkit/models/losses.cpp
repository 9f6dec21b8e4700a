#include "lmkit/models/losses.h"

#include <ATen/ATen.h>

namespace lmkit::models {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, double label_smoothing) {
  at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  at::Tensor t = targets.reshape({-1});
  if (at::isReducedFloatingType(flat.scalar_type())) flat = flat.to(at::kFloat);  // bf16 logits: loss in fp32
  // Sum over the targets / their number: with none, 0 rather than NaN, and no device sync to find out.
  const at::Tensor count = t.ne(-100).sum().to(at::kFloat).clamp_min(1.0);
  return at::cross_entropy_loss(flat, t, {}, at::Reduction::Sum, -100, label_smoothing).div(count);
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels) {
  if (logits.size(-1) == 1) return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
  return cross_entropy(logits, labels);
}

std::pair<at::Tensor, at::Tensor> select_targets(const at::Tensor& hidden, const at::Tensor& labels) {
  at::Tensor flat_labels = labels.reshape({-1});
  at::Tensor index = flat_labels.ne(-100).nonzero().squeeze(1);  // (n)
  at::Tensor targets = flat_labels.index_select(0, index);
  const int64_t n = index.size(0);
  int64_t granule = 8;
  while (granule * 2 * 16 <= n) granule *= 2;
  const int64_t padded = (n + granule - 1) / granule * granule;
  if (padded > n) {
    index = at::cat({index, at::zeros({padded - n}, index.options())});
    targets = at::cat({targets, at::full({padded - n}, -100, targets.options())});
  }
  at::Tensor rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, index);  // (N, D)
  return {rows, targets};
}

}  // namespace lmkit::models
