#include "lmkit/models/span_boundary.h"

#include <ATen/ATen.h>

#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"

namespace lmkit::models {

namespace {

// For each position of `labels` (B, T): the last unlabelled position at or before it
// (−1: none) and the first at or after it (T: none), by running maxima.
std::pair<at::Tensor, at::Tensor> unlabelled_around(const at::Tensor& labelled) {
  const int64_t t = labelled.size(1);
  const at::Tensor pos = at::arange(t, labelled.options().dtype(at::kLong)).expand(labelled.sizes());  // (B, T)
  const at::Tensor none = at::full_like(pos, -1);
  at::Tensor left = std::get<0>(at::cummax(at::where(labelled, none, pos), 1));
  // From the right: the running maximum of T−1−j over unlabelled j, read back to front.
  at::Tensor mirrored = std::get<0>(at::cummax(at::where(labelled, none, (t - 1) - pos).flip({1}), 1)).flip({1});
  return {left, (t - 1) - mirrored};
}

// The selected positions: labelled, inside a run with a boundary on both sides, within max_targets of its start.
at::Tensor selected(const at::Tensor& labelled, const at::Tensor& left, const at::Tensor& right, int64_t max_targets) {
  const int64_t t = labelled.size(1);
  const at::Tensor pos = at::arange(t, labelled.options().dtype(at::kLong)).expand(labelled.sizes());
  return labelled & left.ge(0) & right.lt(t) & (pos - left - 1).lt(max_targets);
}

}  // namespace

SpanTargets span_targets(const at::Tensor& labels, int64_t max_targets) {
  const int64_t t = labels.size(1);
  const at::Tensor labelled = labels.ne(-100);                       // (B, T)
  auto [left, right] = unlabelled_around(labelled);                  // (B, T) each
  const at::Tensor keep = selected(labelled, left, right, max_targets);
  const at::Tensor base = at::arange(labels.size(0), left.options()).mul_(t).unsqueeze(1);  // (B, 1)
  const at::Tensor pos = at::arange(t, left.options()).unsqueeze(0);                          // (1, T)
  SpanTargets s;
  s.index = keep.reshape({-1}).nonzero().squeeze(1);                  // (N)
  auto pick = [&](const at::Tensor& x) { return x.reshape({-1}).index_select(0, s.index); };
  s.left = pick(left + base);
  s.right = pick(right + base);
  s.relative = pick(pos - left - 1);
  s.labels = pick(labels).to(at::kLong);
  return s;
}

int64_t count_span_targets(const at::Tensor& labels, int64_t max_targets) {
  if (!labels.defined() || labels.dim() != 2) return 0;
  const at::Tensor labelled = labels.ne(-100);
  auto [left, right] = unlabelled_around(labelled);
  return selected(labelled, left, right, max_targets).sum().item<int64_t>();
}

SpanBoundaryHeadImpl::SpanBoundaryHeadImpl(const SpanBoundaryOptions& o) : options(o) {
  const int64_t d = o.hidden_size;
  positions = register_module("positions", torch::nn::Embedding(o.max_targets, o.position_size));
  first = register_module("first", torch::nn::Linear(2 * d + o.position_size, d));
  first_norm = register_module("first_norm", nn::Norm(nn::NormOptions(d).eps(o.norm_eps)));
  second = register_module("second", torch::nn::Linear(d, d));
  second_norm = register_module("second_norm", nn::Norm(nn::NormOptions(d).eps(o.norm_eps)));
  bias = register_parameter("bias", at::zeros({o.vocab_size}));
}

at::Tensor SpanBoundaryHeadImpl::forward(const at::Tensor& hidden, const SpanTargets& s) {
  const at::Tensor rows = hidden.reshape({-1, hidden.size(-1)});  // (B·T, D)
  at::Tensor x = at::cat({rows.index_select(0, s.left), rows.index_select(0, s.right),
                          positions->weight.index_select(0, s.relative).to(rows.scalar_type())},
                         1);                                                        // (N, 2D + P)
  x = first_norm(nn::activate(first(x), options.activation));                      // (N, D)
  return second_norm(nn::activate(second(x), options.activation));                 // (N, D)
}

void SpanBoundaryHeadImpl::add_term(Output& out, const at::Tensor& hidden, const at::Tensor& labels,
                                    const at::Tensor& decoder) {
  const SpanTargets s = span_targets(labels, options.max_targets);
  at::Tensor loss = linear_cross_entropy(forward(hidden, s), decoder, bias, s.labels);
  out.terms.push_back({"sbo", loss, at::scalar_tensor(s.index.size(0), labels.options().dtype(at::kLong))});
  out.loss = out.loss.defined() ? out.loss + loss : loss;
}

void SpanBoundaryHeadImpl::add_hf_tensors(std::vector<HfTensor>& t, const std::string& prefix) {
  t.push_back({prefix + "bias", bias});
  t.push_back({prefix + "position_embeddings.weight", positions->weight});
  add_linear(t, prefix + "mlp_layer_norm.linear1", first);
  add_norm(t, prefix + "mlp_layer_norm.layer_norm1", first_norm);
  add_linear(t, prefix + "mlp_layer_norm.linear2", second);
  add_norm(t, prefix + "mlp_layer_norm.layer_norm2", second_norm);
}

double SpanBoundaryHeadImpl::flops_per_target() const {
  const double d = static_cast<double>(options.hidden_size), p = static_cast<double>(options.position_size);
  return 2 * (2 * d + p) * d + 2 * d * d + 2 * d * static_cast<double>(options.vocab_size);
}

}  // namespace lmkit::models
