#include "lmkit/models/losses.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "lmkit/core/runtime.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One chunk's loss (added to `loss`) and share · dL/dlogits in the compute dtype, through
// float32 (float64 for double inputs): log-softmax, gather, exp, scatter (the CPU's path).
at::Tensor composite_chunk_gradient(const at::Tensor& chunk, const at::Tensor& bias, const at::Tensor& t,
                                    const at::Tensor& s, int64_t v, double smoothing, at::ScalarType acc,
                                    at::ScalarType compute, at::Tensor& loss) {
  at::Tensor logits = chunk.to(acc);  // (C, Vp)
  if (bias.defined()) logits.narrow(1, 0, v).add_(bias);
  const int64_t vp = logits.size(1);
  if (vp != v) logits.narrow(1, v, vp - v).fill_(-std::numeric_limits<double>::infinity());
  at::Tensor logp = at::_log_softmax(logits, 1, false);
  logits.reset();
  at::Tensor per_row = logp.gather(1, t).squeeze(1).neg();  // (C) negative log-likelihood
  if (smoothing > 0) per_row = per_row.mul(1 - smoothing).sub(logp.narrow(1, 0, v).mean(1), /*alpha=*/smoothing);
  loss.add_(per_row.mul(s).sum());
  // d loss / d logits = share · (softmax − (1−ε)·onehot − ε/V), row by row.
  at::Tensor g = logp.exp_();
  g.scatter_add_(1, t, at::full({g.size(0), 1}, -(1 - smoothing), g.options()));
  if (smoothing > 0) g.narrow(1, 0, v).sub_(smoothing / static_cast<double>(v));
  at::Tensor gc = at::empty(g.sizes(), g.options().dtype(compute));
  at::mul_out(gc, g, s.unsqueeze(1));
  return gc;
}

// The head's weight in the compute dtype, its rows rounded up to a multiple of 64 with zero rows:
// an odd vocabulary (GPT-2's 50,257) makes cuBLAS fall back to CUTLASS's sm75 kernels with
// alignment 1, 3× slower on an H100 (measured). Callers mask or drop the padding rows' logits.
at::Tensor padded_weight(const at::Tensor& weight, at::ScalarType compute) {
  const int64_t v = weight.size(0), vp = (v + 63) / 64 * 64;
  at::Tensor w = weight.to(compute);
  if (vp == v) return w;
  at::Tensor padded = at::zeros({vp, weight.size(1)}, w.options());
  padded.narrow(0, 0, v).copy_(w);
  return padded;
}

// Each input's gradient of the loss (grad_bias undefined without a bias).
struct HeadGradients {
  at::Tensor hidden, weight, bias;
};

// The mean cross-entropy of hidden·weightᵀ + bias over the rows, a chunk of rows at a time, and
// with `grads` each chunk's gradients too (without: evaluation, validation: the loss alone, the
// same value to the bit, without the two gradient products).
at::Tensor chunked_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& targets,
                        double smoothing, int64_t chunk_elements, at::ScalarType compute, HeadGradients* grads) {
  // The casts are explicit here; autocast must not add its own.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const int64_t n = hidden.size(0), v = weight.size(0);
  const int64_t rows = std::max<int64_t>(1, chunk_elements / std::max<int64_t>(v, 1));
  const at::Tensor w = padded_weight(weight, compute);  // its padding rows' logits -inf: they change nothing
  const int64_t vp = w.size(0);
  const at::ScalarType acc = compute == at::kDouble ? at::kDouble : at::kFloat;  // softmax and sums
  const at::Tensor valid = targets.ne(-100);
  // Each target's share of the mean; none at all gives a loss of 0 (not 0/0).
  const at::Tensor count = valid.sum().to(acc).clamp_min(1.0);
  const at::Tensor share = valid.to(acc).div(count);  // (N)
  const at::Tensor safe = targets.masked_fill(valid.logical_not(), 0);
  if (grads) {
    grads->hidden = at::empty_like(hidden, at::MemoryFormat::Contiguous);
    grads->weight = at::zeros_like(weight, at::MemoryFormat::Contiguous);
    grads->bias = bias.defined() ? at::zeros_like(bias, at::MemoryFormat::Contiguous) : at::Tensor();
  }
  at::Tensor loss = at::zeros({}, hidden.options().dtype(acc));
  for (int64_t start = 0; start < n; start += rows) {
    const int64_t end = std::min(n, start + rows);
    const at::Tensor h = hidden.slice(0, start, end).to(compute);
    const at::Tensor t = safe.slice(0, start, end).unsqueeze(1);  // (C, 1)
    const at::Tensor s = share.slice(0, start, end);
    at::Tensor gc = at::mm(h, w.t());  // (C, Vp) in the compute dtype
    if (nn::softmax_cross_entropy_applies(gc)) {
      // The CUDA kernel: the chunk's logits become share · dL/dlogits in place, no float32 copy.
      if (bias.defined()) gc.narrow(1, 0, v).add_(bias);
      loss.add_(nn::softmax_cross_entropy_(gc, t, s, v, smoothing).mul(s).sum());
    } else {
      gc = composite_chunk_gradient(gc, bias, t, s, v, smoothing, acc, compute, loss);
    }
    if (!grads) continue;
    if (grads->bias.defined()) grads->bias.add_(gc.narrow(1, 0, v).sum(0, false, acc));
    grads->hidden.slice(0, start, end).copy_(at::mm(gc, w));  // converts on the copy
    if (vp == v && compute == grads->weight.scalar_type()) {
      grads->weight.addmm_(gc.t(), h);
    } else {
      grads->weight.add_(at::mm(gc.t(), h).narrow(0, 0, v));  // accumulates in the weight's dtype
    }
  }
  return loss;
}

// Forward computes the loss and, chunk by chunk, its gradients; backward scales them.
struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const std::optional<at::Tensor>& maybe_bias, const at::Tensor& targets, double smoothing,
                            int64_t chunk_elements, at::ScalarType compute) {
    const at::Tensor bias = maybe_bias.value_or(at::Tensor());  // an undefined tensor cannot be an input
    HeadGradients grads;
    const at::Tensor loss = chunked_loss(hidden, weight, bias, targets, smoothing, chunk_elements, compute, &grads);
    ctx->saved_data["grad_hidden"] = grads.hidden;
    ctx->saved_data["grad_weight"] = grads.weight;
    ctx->saved_data["grad_bias"] = grads.bias;
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_output) {
    const at::Tensor& go = grad_output[0];
    auto scaled = [&](const char* name) {
      at::Tensor g = ctx->saved_data[name].toTensor();
      return g.defined() ? g.mul(go.to(g.scalar_type())) : g;
    };
    return {scaled("grad_hidden"), scaled("grad_weight"), scaled("grad_bias"), {}, {}, {}, {}};
  }
};

}  // namespace

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& targets, double label_smoothing, int64_t chunk_elements) {
  if (lever_disabled("chunked_ce")) return cross_entropy(at::linear(hidden, weight, bias), targets, label_smoothing);
  const auto device = hidden.device().type();
  const at::ScalarType compute = at::autocast::is_autocast_enabled(device) ? at::autocast::get_autocast_dtype(device)
                                                                           : hidden.scalar_type();
  const bool gradients = at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad() ||
                                                        (bias.defined() && bias.requires_grad()));
  if (!gradients) {
    return chunked_loss(hidden.reshape({-1, hidden.size(-1)}), weight, bias, targets.reshape({-1}), label_smoothing,
                        chunk_elements, compute, nullptr);
  }
  const std::optional<at::Tensor> maybe_bias = bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
  return LinearCrossEntropy::apply(hidden.reshape({-1, hidden.size(-1)}), weight, maybe_bias, targets.reshape({-1}),
                                   label_smoothing, chunk_elements, compute);
}

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

void vocabulary_head(Output& out, const at::Tensor& labels, bool full_logits,
                     const std::function<at::Tensor(const at::Tensor&)>& transform, const at::Tensor& weight,
                     const at::Tensor& bias, double label_smoothing) {
  auto input = [&](const at::Tensor& h) { return transform ? transform(h) : h; };
  if (full_logits || !labels.defined()) out.logits = nn::linear(input(out.last_hidden_state), weight, bias);  // (B, T, V)
  if (!labels.defined()) return;
  if (out.logits.defined()) {
    out.loss = cross_entropy(out.logits, labels, label_smoothing);
    return;
  }
  auto [rows, targets] = select_targets(out.last_hidden_state, labels);  // (N, D), (N)
  out.loss = linear_cross_entropy(input(rows), weight, bias, targets, label_smoothing);
}

}  // namespace lmkit::models
