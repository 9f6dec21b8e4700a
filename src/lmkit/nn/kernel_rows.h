// The per-row math of lmkit's fused kernels, written once for the GPU and the host: the CUDA
// kernels (the .cu files) run it with a warp (or block) of workers and shuffle sums; the host
// implementation (kernels_host.cpp) runs the same functions with one worker, so the fused
// ops' wiring and math are checked against LibTorch's CPU autograd in every CI run
// (tests/cuda/fused_test.cpp, "[fused][host]"). No CUDA or LibTorch header: an element type
// is read and written through Elem<T>, specialised for float here, for __nv_bfloat16 in
// kernels_common.cuh and for c10::BFloat16 in kernels_host.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "lmkit/nn/kernels.h"

#if defined(__CUDACC__)
#define LMKIT_HD __host__ __device__ __forceinline__
#define LMKIT_HD_TEMPLATE _Pragma("nv_exec_check_disable") template
#define LMKIT_UNROLL _Pragma("unroll")
#else
#define LMKIT_HD inline
#define LMKIT_HD_TEMPLATE template
#define LMKIT_UNROLL
#endif

namespace lmkit::nn::kernels {

/// Loads, stores and rounds one element type in float32.
template <typename T>
struct Elem;

template <>
struct Elem<float> {
  static LMKIT_HD float load(const float* p, int64_t i) { return p[i]; }
  static LMKIT_HD void store(float* p, int64_t i, float v) { p[i] = v; }
  static LMKIT_HD float round(float v) { return v; }  // a value as the type holds it
};

// The high 32 bits of a 32 x 32-bit product.
LMKIT_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

struct Words4 {
  uint32_t w[4];
};

// Salmon et al. 2011, Philox4x32-10: the block at counter (lo, hi) = words 0-1 and 2-3, key seed.
LMKIT_HD Words4 philox4(uint64_t seed, uint64_t lo, uint64_t hi) {
  uint32_t c0 = static_cast<uint32_t>(lo), c1 = static_cast<uint32_t>(lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(hi), c3 = static_cast<uint32_t>(hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
LMKIT_UNROLL
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi32(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = mulhi32(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Word `lane` of that block.
LMKIT_HD uint32_t philox(uint64_t seed, uint64_t lo, uint64_t hi, int lane) { return philox4(seed, lo, hi).w[lane]; }

// Element i's dropout decisions come from the block at ATen's counter layout
// (curand_init(seed, subsequence, offset)): words 0-1 the generator's offset / 4, words 2-3 the
// subsequence, here the element's group of four; so a fused call's draws are the blocks an ATen
// kernel given the same philox_engine_inputs would draw, never another call's.
LMKIT_HD Words4 dropout_block(const Dropout& d, int64_t group) {
  return philox4(d.seed, d.offset >> 2, static_cast<uint64_t>(group));
}

// Whether element i survives dropout (Dropout in kernels.h).
LMKIT_HD bool keep(const Dropout& d, int64_t i) {
  if (d.threshold == 0) return true;
  return dropout_block(d, i >> 2).w[i & 3] >= d.threshold;
}

// d gelu(x) / dx: exact (erf) GELU, or the tanh approximation (GPT-2's gelu_new).
LMKIT_HD float gelu_grad(float x, bool tanh_approx) {
  if (tanh_approx) {
    constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
    const float inner = k * (x + 0.044715f * x * x * x);
    const float t = tanhf(inner);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
  }
  constexpr float inv_sqrt2 = 0.7071067811865476f, inv_sqrt_2pi = 0.3989422804014327f;
  return 0.5f * (1.0f + erff(x * inv_sqrt2)) + x * inv_sqrt_2pi * expf(-0.5f * x * x);
}

// One gelu_bias_backward element: gpre = gy · gelu'(pre), as the gradient's type holds it
// (the bias sums gpre as stored, as the composite does).
template <typename T>
LMKIT_HD float gelu_grad_element(const T* gy, const T* pre, T* gpre, int64_t i, bool tanh_approx) {
  const float g = Elem<T>::round(Elem<T>::load(gy, i) * gelu_grad(Elem<T>::load(pre, i), tanh_approx));
  Elem<T>::store(gpre, i, g);
  return g;
}

// Calls fn(i, c, kept) for the elements of row `row` (d columns) that worker `lane` of `lanes`
// owns: every lanes-th, so that a warp's loads and stores are coalesced. Each element takes
// its word of its own Philox block: in a warp that is one Philox evaluation an iteration
// for 32 elements either way, and giving each lane 4 consecutive elements (one block for
// the four) measured 26% slower in backward_rows on an H100 (docs/benchmarks.md).
LMKIT_HD_TEMPLATE <typename Fn>
LMKIT_HD void for_row_elements(int64_t row, int64_t d, int lane, int lanes, const Dropout& dropout, Fn&& fn) {
  const int64_t base = row * d;
  for (int64_t c = lane; c < d; c += lanes) fn(base + c, c, keep(dropout, base + c));
}

// A plain pass over the row's elements of one worker (no dropout).
LMKIT_HD_TEMPLATE <typename Fn>
LMKIT_HD void for_row_columns(int64_t d, int lane, int lanes, Fn&& fn) {
  for (int64_t c = lane; c < d; c += lanes) fn(c);
}

// residual_norm_forward's row (kernels.h): `sum` adds a value over the row's workers (a warp's
// butterfly on the GPU, the identity for one host worker).
LMKIT_HD_TEMPLATE <typename TX, typename TH, typename TS, typename TY, typename Sum>
LMKIT_HD void residual_norm_forward_row(const TX* x, const TH* h, TS* s, TY* y, float* mean_out, float* rstd_out,
                                        const float* w, const float* b, int64_t row, int64_t d, float eps, bool rms,
                                        const Dropout& dropout, int lane, int lanes, Sum sum) {
  const int64_t base = row * d;
  float total = 0.0f;
  for_row_elements(row, d, lane, lanes, dropout, [&](int64_t i, int64_t, bool kept) {
    // As the composite: dropout's output in h's type, the sum in s's, the norm on the stored sum.
    const float dropped = kept ? Elem<TH>::round(Elem<TH>::load(h, i) * dropout.scale) : 0.0f;
    const float v = Elem<TS>::round(Elem<TX>::load(x, i) + dropped);
    Elem<TS>::store(s, i, v);
    total += v;
  });
  const float mean = rms ? 0.0f : sum(total) / static_cast<float>(d);
  float var = 0.0f;
  for_row_columns(d, lane, lanes, [&](int64_t c) {
    const float v = Elem<TS>::load(s, base + c) - mean;
    var += v * v;
  });
  const float rstd = 1.0f / sqrtf(sum(var) / static_cast<float>(d) + eps);
  for_row_columns(d, lane, lanes, [&](int64_t c) {
    const float xhat = (Elem<TS>::load(s, base + c) - mean) * rstd;
    Elem<TY>::store(y, base + c, b ? xhat * w[c] + b[c] : xhat * w[c]);  // in y's type: the cast autocast makes
  });
  if (lane == 0) mean_out[row] = mean, rstd_out[row] = rstd;
}

// residual_norm_backward's row: d(norm)/ds plus the residual stream's own gradient, then
// through the dropout mask drawn again.
LMKIT_HD_TEMPLATE <typename TX, typename TH, typename TS, typename TG, typename Sum>
LMKIT_HD void residual_norm_backward_row(const TG* gy, const TS* gs, const TS* s, const float* mean,
                                         const float* rstd, const float* w, TX* gx, TH* gh, int64_t row, int64_t d,
                                         bool rms, const Dropout& dropout, int lane, int lanes, Sum sum) {
  const int64_t base = row * d;
  const float mu = mean[row], r = rstd[row];
  float m1 = 0.0f, m2 = 0.0f;  // Σ dxhat, Σ dxhat·xhat
  for_row_columns(d, lane, lanes, [&](int64_t c) {
    const float dxhat = Elem<TG>::load(gy, base + c) * w[c];
    m1 += dxhat;
    m2 += dxhat * (Elem<TS>::load(s, base + c) - mu) * r;
  });
  m1 = rms ? 0.0f : sum(m1) / static_cast<float>(d);
  m2 = sum(m2) / static_cast<float>(d);
  for_row_elements(row, d, lane, lanes, dropout, [&](int64_t i, int64_t c, bool kept) {
    const float xhat = (Elem<TS>::load(s, i) - mu) * r;
    float g = r * (Elem<TG>::load(gy, i) * w[c] - m1 - xhat * m2);
    if (gs) g += Elem<TS>::load(gs, i);
    Elem<TX>::store(gx, i, g);
    Elem<TH>::store(gh, i, kept ? g * dropout.scale : 0.0f);
  });
}

// (max, Σ exp(z − max)) of two parts of a row.
LMKIT_HD void softmax_combine(float& m, float& l, float m2, float l2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) return;
  l = l * expf(m - top) + l2 * expf(m2 - top);
  m = top;
}

// softmax_cross_entropy's row over `padded` logits: `stats(m, l, z)` combines a worker's online
// (max, Σ exp, Σ z) over the row's workers, `barrier()` waits for all of them.
LMKIT_HD_TEMPLATE <typename T, typename Stats, typename Barrier>
LMKIT_HD void softmax_cross_entropy_row(T* z, int64_t target, float share, float* loss, int64_t vocab, int64_t padded,
                                        float smoothing, int lane, int lanes, Stats stats, Barrier barrier) {
  float m = -INFINITY, l = 0.0f, zsum = 0.0f;
  for (int64_t j = lane; j < vocab; j += lanes) {
    const float v = Elem<T>::load(z, j);
    if (v > m) {  // one exponential an element (Milakov & Gimelshein 2018, online softmax)
      l = l * expf(m - v) + 1.0f;
      m = v;
    } else {
      l += expf(v - m);
    }
    zsum += v;
  }
  stats(m, l, zsum);
  const float lse = m + logf(l);
  const bool valid = target >= 0 && target < vocab;  // out of range: a NaN loss, no read outside the row
  const float zt = valid ? Elem<T>::load(z, target) : NAN;
  barrier();  // every worker has read z[target] before any overwrites it
  if (lane == 0) {
    const float nll = lse - zt;
    *loss = smoothing > 0 ? (1.0f - smoothing) * nll + smoothing * (lse - zsum / static_cast<float>(vocab)) : nll;
  }
  const float uniform = smoothing / static_cast<float>(vocab);
  for (int64_t j = lane; j < padded; j += lanes) {
    if (j >= vocab) {
      Elem<T>::store(z, j, 0.0f);
      continue;
    }
    float g = expf(Elem<T>::load(z, j) - lse) - uniform;
    if (j == target) g -= 1.0f - smoothing;
    Elem<T>::store(z, j, share * g);
  }
}

}  // namespace lmkit::nn::kernels
