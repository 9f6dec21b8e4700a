// lmkit's fused CUDA kernels (the .cu files beside the ops they fuse), as plain launch
// functions: raw pointers, a stream, no ATen type, so that nvcc compiles them without
// LibTorch's headers. nn/fused.cpp wraps them in autograd functions and falls back to the
// ATen composite wherever they do not apply; nothing else calls them. Declared whether or
// not the kernels were built (LMKIT_WITH_CUDA_KERNELS); only fused.cpp's CUDA path links them.
// Their per-row math is kernel_rows.h's, which the host versions below run too.
//
// Every kernel is deterministic: no atomics; sums over rows run in a fixed order (a
// per-tile partial, then the partials in order), so two runs give the same bits.
#pragma once

#include <cstdint>

namespace lmkit::nn::kernels {

/// Element types the kernels take.
enum class Dtype { kFloat = 0, kBFloat16 = 1 };

/// Dropout drawn inside a kernel: element i of a call is kept when Philox4x32-10 at key
/// `seed`, counter words 0-1 = offset / 4 and 2-3 = i / 4 (ATen's curand_init(seed,
/// subsequence i / 4, offset)) gives, in lane i % 4, a word >= threshold (threshold =
/// p · 2^32); kept values are scaled by `scale` = 1 / (1 − p). threshold 0 means no dropout.
struct Dropout {
  uint64_t seed = 0, offset = 0;
  uint32_t threshold = 0;
  float scale = 1.0f;
};

/// s = x + dropout(h) (stored in `s_type`), y = norm(s) computed in float32 and stored in
/// `y_type` (bf16 where y only feeds linear layers under autocast: the cast they would make):
/// LayerNorm ((s − mean)·rstd·w + b) or, with `rms`, RMSNorm (s·rstd·w); w and b float32 (b
/// may be null). mean and rstd (float32, one per row) are kept for the backward pass. Rows of
/// `d` elements.
void residual_norm_forward(const void* x, Dtype x_type, const void* h, Dtype h_type, void* s, Dtype s_type, void* y,
                           Dtype y_type, float* mean, float* rstd, const float* w, const float* b, int64_t rows,
                           int64_t d, float eps, bool rms, Dropout dropout, void* stream);

/// The gradients of residual_norm_forward: from gy (dL/dy, `gy_type`: y's type) and gs (dL/ds
/// from the residual stream, `s_type`, may be null) it writes gx (dL/dx, `x_type`), gh (dL/dh,
/// `h_type`, the same dropout mask regenerated), gw and gb (float32; gb null for RMSNorm).
/// `partials` is scratch of column_partials_size(rows, d) floats.
void residual_norm_backward(const void* gy, Dtype gy_type, const void* gs, const void* s, Dtype s_type,
                            const float* mean, const float* rstd, const float* w, void* gx, Dtype x_type, void* gh,
                            Dtype h_type, float* gw, float* gb, float* partials, int64_t rows, int64_t d, bool rms,
                            Dropout dropout, void* stream);

/// Floats of scratch a column reduction over `rows` x `d` needs (two sums per column).
int64_t column_partials_size(int64_t rows, int64_t d);

/// The backward pass of y = gelu(pre) (exact erf GELU, or the tanh approximation) with the
/// bias gradient of the linear layer before it in the same pass: gpre = gy · gelu'(pre)
/// (`type`), gbias = Σ_rows gpre (float32, may be null). pre and gy share `type`.
void gelu_bias_backward(const void* gy, const void* pre, void* gpre, Dtype type, float* gbias, float* partials,
                        int64_t rows, int64_t d, bool tanh, void* stream);

/// The LM head's softmax cross-entropy over logits (rows x padded, `type`: the chunk of
/// logits a matmul produced, never a float32 copy), in place: per row, loss[r] = the
/// (label-smoothed) negative log-likelihood of target[r] over the first `vocab` columns,
/// and the logits are overwritten with dL/dlogits · share[r] = share[r]·(softmax − (1−ε)·onehot
/// − ε/vocab), zero in the padding columns [vocab, padded). The caller masks ignored rows
/// with share 0 and a valid index; a target outside [0, vocab) is never read through: its
/// row's loss is NaN (the composite's device assert, without poisoning the context).
void softmax_cross_entropy(void* logits, Dtype type, const int64_t* targets, const float* share, float* loss,
                           int64_t rows, int64_t vocab, int64_t padded, float smoothing, void* stream);

/// The same entry points on the host (kernels_host.cpp, always built): kernel_rows.h's row
/// math with one worker a row, the column sums in row order. What the CPU runs when the
/// fused ops' host path is switched on (nn::set_host_kernels_enabled): the tests of the fused
/// ops' wiring, which need no GPU. c10::BFloat16 for Dtype::kBFloat16.
namespace host {
void residual_norm_forward(const void* x, Dtype x_type, const void* h, Dtype h_type, void* s, Dtype s_type, void* y,
                           Dtype y_type, float* mean, float* rstd, const float* w, const float* b, int64_t rows,
                           int64_t d, float eps, bool rms, Dropout dropout);
void residual_norm_backward(const void* gy, Dtype gy_type, const void* gs, const void* s, Dtype s_type,
                            const float* mean, const float* rstd, const float* w, void* gx, Dtype x_type, void* gh,
                            Dtype h_type, float* gw, float* gb, int64_t rows, int64_t d, bool rms, Dropout dropout);
void gelu_bias_backward(const void* gy, const void* pre, void* gpre, Dtype type, float* gbias, int64_t rows, int64_t d,
                        bool tanh);
void softmax_cross_entropy(void* logits, Dtype type, const int64_t* targets, const float* share, float* loss,
                           int64_t rows, int64_t vocab, int64_t padded, float smoothing);
}  // namespace host

/// lmkit's CPU paths (kernels_cpu.cpp), float32, rows in parallel and vectorised. The residual
/// step without dropout: sums in an order fixed by the row count alone (the same bits for any
/// thread count); residual_norm_forward as above (h null: y = norm(x) alone, s unwritten, and
/// x is the s backward reads), residual_norm_backward writes gx = dL/dx = dL/dh (no dropout:
/// one gradient for both), gw and gb (null for RMSNorm). Rotary positions:
/// out = x·cos + rotate_half(x)·sin over (batch, heads, t, d) rows, x with these strides (its
/// last dimension dense), out dense, cos and sin dense (1|batch, t, d); `backward` maps a
/// gradient of out to one of x. The composite's roundings, the same bits. SwiGLU over n dense
/// elements: y = silu(g)·u; backward, dg and du from dy (an exponential of lmkit's own: within
/// a few roundings of the composite, not its bits).
namespace cpu {
struct RotaryShape {
  int64_t batch = 0, heads = 0, t = 0, d = 0;
  int64_t stride_b = 0, stride_h = 0, stride_t = 0;
  bool cos_per_batch = false;
};
void rotary(const float* x, const float* cos, const float* sin, float* out, const RotaryShape& shape, bool backward);
void swiglu_forward(const float* g, const float* u, float* y, int64_t n);
void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n);
void residual_norm_forward(const float* x, const float* h, float* s, float* y, float* mean, float* rstd,
                           const float* w, const float* b, int64_t rows, int64_t d, float eps, bool rms);
void residual_norm_backward(const float* gy, const float* gs, const float* s, const float* mean, const float* rstd,
                            const float* w, float* gx, float* gw, float* gb, int64_t rows, int64_t d, bool rms);
}  // namespace cpu

}  // namespace lmkit::nn::kernels
