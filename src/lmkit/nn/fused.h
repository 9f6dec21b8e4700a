// The training step's fused ops: each is the ATen composite on the CPU (but the residual step
// in float32 without dropout, which has a CPU path of its own) and wherever a kernel does not apply, and lmkit's CUDA kernel (nn/kernels.h) on a GPU when the build
// has them, unless LMKIT_DISABLE=fused switches them off (the default since their first GPU
// run, 2026-11-27: parity, memcheck and exact resume pass; docs/benchmarks.md). Forward and backward agree with the
// composite within rounding ([cuda] tests, tests/cuda/fused_test.cpp); dropout inside a
// fused op draws from the device's generator, so exact resume holds either way.
#pragma once

#include <utility>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/nn/norm.h"

namespace lmkit::nn {

/// Whether this build compiled the fused CUDA kernels (the CUDA toolkit was found).
bool fused_kernels_built();

/// Whether CUDA tensors take the fused kernels: built, and "fused" not in LMKIT_DISABLE
/// (or switched by set_fused_kernels_enabled).
bool fused_kernels_enabled();

/// Switches the fused kernels on or off for this process (on only where built), e.g. to
/// compare both paths in one program (tests, lmkit-bench); returns the previous setting.
bool set_fused_kernels_enabled(bool on);

/// Whether CPU tensors take the kernels' host implementation (kernels.h, namespace host)
/// instead of the composite: off unless switched on, as the tests of the fused ops' wiring
/// do ("[fused][host]"); slower than the composites, never a training path.
bool host_kernels_enabled();

/// Switches the host implementation on or off for this process; returns the previous setting.
bool set_host_kernels_enabled(bool on);

/// Whether float32 CPU tensors (no CPU autocast) take lmkit's CPU paths (nn/kernels.h,
/// namespace cpu), each one pass where the composite makes several: the residual step without
/// dropout (Llama's and Mistral's layers in training; every family's evaluation), where
/// pre-norm stacks hand their sums on too, rotary positions (rotary_cpu) and SwiGLU
/// (swiglu_cpu). On unless
/// LMKIT_DISABLE names "cpu_fused" (or switched by set_cpu_kernels_enabled); the host
/// implementation, where switched on, takes precedence.
bool cpu_kernels_enabled();

/// Switches the CPU paths on or off for this process; returns the previous setting.
bool set_cpu_kernels_enabled(bool on);

/// y = norm(x) (LayerNorm with `bias`, RMSNorm without) on the CPU path: the residual step's
/// row math without its sum, so that a sum made apart and then normalised gives the fused
/// step's bits (NormImpl::forward takes it). Undefined where it does not apply.
at::Tensor norm_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

/// x·cos + rotate_half(x)·sin (nn::apply_rotary) on the CPU path, forward and backward in one
/// pass with the composite's roundings (the same bits): x (B, H, T, hd) float32 on the CPU,
/// cos and sin (1|B, 1, T, hd) float32 without gradients. Undefined where it does not apply,
/// and the caller takes the composite.
at::Tensor rotary_cpu(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// silu(gate)·up (SwiGLU: Llama's and Mistral's MLP) on the CPU path, forward and backward in one
/// pass each, saving gate and up only: float32 CPU tensors of one shape. Within a few float32
/// roundings of the composite (its own exponential), not its bits. Undefined where it does not
/// apply, and the caller takes the composite.
at::Tensor swiglu_cpu(const at::Tensor& gate, const at::Tensor& up);

/// A Transformer layer's residual step: s = x + dropout(h, p) (p applies while training),
/// y = norm(s). Returns {s, y}. y is float32, as Norm returns it; with `feeds_linear` (y is
/// only ever the input of linear layers, as a pre-norm sublayer's is) on the fused path under
/// bf16 autocast, y is bf16: the cast the linear's autocast would make, written by the kernel
/// itself (the same bits; no cast kernel forward, nor for y's gradient backward).
std::pair<at::Tensor, at::Tensor> residual_norm(const at::Tensor& x, const at::Tensor& h, double p, bool training,
                                                Norm& norm, bool feeds_linear = false);

/// A residual stream whose last sum is still to be made: x + dropout(h, p), p the rate of the
/// layer that made h (0 outside training); h undefined: the stream is x. Pre-norm stacks hand
/// it from layer to layer on the fused path (defers_residual_sums), so that a layer's last
/// residual add and the next layer's first norm (or the stack's final norm) are one kernel,
/// reading the residual stream once instead of twice.
struct PendingSum {
  at::Tensor x, h;
  double p = 0;
  /// The stream itself, x + dropout(h, p), by the composite.
  at::Tensor sum() const;
};

/// residual_norm of a pending sum: {the sum, norm(sum)}; {x, norm(x)} where nothing is pending.
std::pair<at::Tensor, at::Tensor> residual_norm(const PendingSum& r, Norm& norm, bool feeds_linear = false);

/// Whether pre-norm stacks hand pending sums between their layers for a stream x: where the
/// fused kernels (or their host path, or the CPU path) take it, unless LMKIT_DISABLE names "fused_prenorm"
/// (which also keeps feeds_linear's y in float32). On the composite path it would gain nothing.
bool defers_residual_sums(const at::Tensor& x);

/// gelu(linear(x)) (exact, or the tanh approximation), with GELU's backward and the
/// bias gradient in one kernel on the fused path.
at::Tensor linear_gelu(torch::nn::Linear& linear, const at::Tensor& x, bool tanh_approx);

/// Whether softmax_cross_entropy_ takes this chunk of logits: the fused kernels on, a
/// contiguous (rows, padded) CUDA tensor in float32 or bf16.
bool softmax_cross_entropy_applies(const at::Tensor& logits);

/// The fused LM-head loss of one chunk, in place: `logits` (rows, padded) become
/// share · dL/dlogits (zero in the padding columns [vocab, padded)), and the per-row
/// negative log-likelihood of `targets` (rows or (rows, 1), valid ids), label-smoothed by
/// `smoothing`, is returned (float32). Only where softmax_cross_entropy_applies().
at::Tensor softmax_cross_entropy_(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& share, int64_t vocab,
                                  double smoothing);

}  // namespace lmkit::nn
