// lmkit's CPU paths (kernels.h, namespace cpu), each one pass where the composite makes several:
//
// The residual step s = x + h, y = norm(s) in float32 without dropout (Llama's and Mistral's
// every layer, any family's evaluation), and y = norm(x) alone (every other float32 norm, so
// that a sum made apart and then normalised has the fused step's very bits: --recompute, which
// hands no sum across a layer, gives the stored path's), forward and backward in one pass over
// each row, as the CUDA kernel does on a GPU: the composite makes some six passes forward (add, square,
// mean, rsqrt, two products) and more backward. Each row's sums keep 16 partial sums (one a
// lane of two AVX registers; the compiler vectorises the fixed-length inner loops) added in a
// fixed order, so a row's result does not depend on the thread count; the weight and bias
// gradients sum fixed slices of rows, then the slices in order, for the same reason.
//
// Rotary positions x·cos + rotate_half(x)·sin, forward and backward: the composite's slices,
// negation, concatenation, two products and a sum (and backward zero-filled slices) in one
// pass, with the composite's very roundings (no fused multiply-add: the same bits).
//
// SwiGLU y = silu(g)·u (Llama's and Mistral's MLP), forward and backward in one pass each where
// the composite makes two and three (silu, the product; the product's two gradients, silu's),
// with an exponential of its own that the compiler vectorises (exp_approx), so not the
// composite's bits: within a few float32 roundings of it.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lmkit/core/simd.h"
#include "lmkit/nn/kernels.h"

namespace lmkit::nn::kernels::cpu {

namespace {

constexpr int kLanes = 16;

// The lanes' partial sums added pairwise, in the same order every time.
inline float lane_total(const float (&acc)[kLanes]) {
  float v[kLanes];
  for (int k = 0; k < kLanes; ++k) v[k] = acc[k];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int k = 0; k < width; ++k) v[k] += v[k + width];
  }
  return v[0];
}

LMKIT_MULTIVERSION void forward_rows(const float* __restrict x, const float* __restrict h, float* __restrict s,
                                     float* __restrict y, float* __restrict mean_out, float* __restrict rstd_out,
                                     const float* __restrict w, const float* __restrict b, int64_t begin,
                                     int64_t end, int64_t d, float eps, bool rms) {
  const int64_t body = d - d % kLanes;
  for (int64_t row = begin; row < end; ++row) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    float acc[kLanes] = {};
    if (h != nullptr) {
      const float* hr = h + row * d;
      float* out = s + row * d;
      for (int64_t c = 0; c < body; c += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          const float v = xr[c + k] + hr[c + k];
          out[c + k] = v;
          acc[k] += v;
        }
      }
      for (int64_t c = body; c < d; ++c) {
        out[c] = xr[c] + hr[c];
        acc[c - body] += out[c];
      }
    } else {
      for (int64_t c = 0; c < body; c += kLanes) {
        for (int k = 0; k < kLanes; ++k) acc[k] += xr[c + k];
      }
      for (int64_t c = body; c < d; ++c) acc[c - body] += xr[c];
    }
    const float* sr = h != nullptr ? s + row * d : xr;  // the norm's input
    const float mean = rms ? 0.0f : lane_total(acc) / static_cast<float>(d);
    float sq[kLanes] = {};
    for (int64_t c = 0; c < body; c += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const float v = sr[c + k] - mean;
        sq[k] += v * v;
      }
    }
    for (int64_t c = body; c < d; ++c) sq[c - body] += (sr[c] - mean) * (sr[c] - mean);
    const float rstd = 1.0f / std::sqrt(lane_total(sq) / static_cast<float>(d) + eps);
    if (b != nullptr) {
      for (int64_t c = 0; c < d; ++c) yr[c] = (sr[c] - mean) * rstd * w[c] + b[c];
    } else {
      for (int64_t c = 0; c < d; ++c) yr[c] = (sr[c] - mean) * rstd * w[c];
    }
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// Rows [begin, end) backward; their weight and bias gradients added, row by row, into pw, pb.
LMKIT_MULTIVERSION void backward_rows(const float* __restrict gy, const float* __restrict gs, const float* __restrict s,
                                      const float* __restrict mean, const float* __restrict rstd,
                                      const float* __restrict w, float* __restrict gx, float* __restrict pw,
                                      float* __restrict pb, int64_t begin, int64_t end, int64_t d, bool rms) {
  const int64_t body = d - d % kLanes;
  for (int64_t row = begin; row < end; ++row) {
    const float* gyr = gy + row * d;
    const float* sr = s + row * d;
    float* gxr = gx + row * d;
    const float mu = mean[row], r = rstd[row];
    float a1[kLanes] = {}, a2[kLanes] = {};  // Σ dxhat, Σ dxhat·xhat
    for (int64_t c = 0; c < body; c += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const float xhat = (sr[c + k] - mu) * r;
        const float dxhat = gyr[c + k] * w[c + k];
        a1[k] += dxhat;
        a2[k] += dxhat * xhat;
        pw[c + k] += gyr[c + k] * xhat;
        pb[c + k] += gyr[c + k];
      }
    }
    for (int64_t c = body; c < d; ++c) {
      const float xhat = (sr[c] - mu) * r;
      const float dxhat = gyr[c] * w[c];
      a1[c - body] += dxhat;
      a2[c - body] += dxhat * xhat;
      pw[c] += gyr[c] * xhat;
      pb[c] += gyr[c];
    }
    const float m1 = rms ? 0.0f : lane_total(a1) / static_cast<float>(d);
    const float m2 = lane_total(a2) / static_cast<float>(d);
    const float* gsr = gs != nullptr ? gs + row * d : nullptr;
    for (int64_t c = 0; c < d; ++c) {
      const float xhat = (sr[c] - mu) * r;
      const float g = r * (gyr[c] * w[c] - m1 - xhat * m2);
      gxr[c] = gsr != nullptr ? g + gsr[c] : g;
    }
  }
}

// out[c] = Σ_slice partials[slice][c], slices in order.
LMKIT_MULTIVERSION void add_slices(const float* __restrict partials, float* __restrict out, int64_t slices, int64_t d) {
  std::fill(out, out + d, 0.0f);
  for (int64_t k = 0; k < slices; ++k) {
    const float* p = partials + k * d;
    for (int64_t c = 0; c < d; ++c) out[c] += p[c];
  }
}

// Rows a slice of the column sums: fixed by the row count alone (never the thread count), at
// least 32, and at most 256 slices.
int64_t slice_rows(int64_t rows) { return std::max<int64_t>(32, (rows + 255) / 256); }

// Rotary rows [begin, end) of a (B, H, T, d) tensor (rows in (b, h, t) order; x strided, out
// dense): out1 = x1·c1 − x2·s1, out2 = x2·c2 + x1·s2 (halves 1, 2 of each row; c, s the row's
// cos and sin: position t, batch b where they have one). `backward` applies the transposed
// rotation to a gradient: g1·c1 + g2·s2, g2·c2 − g1·s1. Products and sums as the composite
// rounds them, so no contraction into fused multiply-adds.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
LMKIT_MULTIVERSION void rotary_rows(const float* __restrict x, const float* __restrict cos, const float* __restrict sin,
                                    float* __restrict out, int64_t begin, int64_t end, const RotaryShape& shape,
                                    bool backward) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  const int64_t half = shape.d / 2;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t t = row % shape.t, bh = row / shape.t, head = bh % shape.heads, b = bh / shape.heads;
    const float* xr = x + b * shape.stride_b + head * shape.stride_h + t * shape.stride_t;
    const int64_t at = ((shape.cos_per_batch ? b : 0) * shape.t + t) * shape.d;
    const float* c = cos + at;
    const float* sn = sin + at;
    float* o = out + row * shape.d;
    if (!backward) {
      for (int64_t j = 0; j < half; ++j) {
        o[j] = xr[j] * c[j] - xr[j + half] * sn[j];
        o[j + half] = xr[j + half] * c[j + half] + xr[j] * sn[j + half];
      }
    } else {
      for (int64_t j = 0; j < half; ++j) {
        o[j] = xr[j] * c[j] + xr[j + half] * sn[j + half];
        o[j + half] = xr[j + half] * c[j + half] - xr[j] * sn[j];
      }
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// e^x in float32: Cephes' expf (relative error about 1e-7), in branch-free steps the compiler
// vectorises: the clamps as min/max (NaN passes them, and stays NaN), rounding to the nearest
// integer n by adding and subtracting 1.5·2^23, r = x - n·ln 2 in two parts, a degree-6
// polynomial, and 2^n made in the exponent bits. Past the clamps: e^88.38 and e^-87.34.
inline float exp_approx(float x) {
  x = std::min(x, 88.3762626647949f);
  x = std::max(x, -87.3365447504020f);
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);  // n in the low mantissa bits of 1.5·2^23 + n
  const int32_t exponent = (bits - 0x4B400000 + 127) << 23;
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return p * scale;
}

LMKIT_MULTIVERSION void swiglu_forward_range(const float* __restrict g, const float* __restrict u, float* __restrict y,
                                             int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float sigmoid = 1.0f / (1.0f + exp_approx(-g[i]));
    y[i] = g[i] * sigmoid * u[i];
  }
}

// d silu(g)/dg = σ(g) + silu(g)·(1 − σ(g)).
LMKIT_MULTIVERSION void swiglu_backward_range(const float* __restrict g, const float* __restrict u,
                                              const float* __restrict dy, float* __restrict dg, float* __restrict du,
                                              int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float sigmoid = 1.0f / (1.0f + exp_approx(-g[i]));
    const float silu = g[i] * sigmoid;
    du[i] = dy[i] * silu;
    dg[i] = dy[i] * u[i] * (sigmoid + silu * (1.0f - sigmoid));
  }
}

constexpr int64_t kSwigluGrain = 32768;

}  // namespace

void swiglu_forward(const float* g, const float* u, float* y, int64_t n) {
  at::parallel_for(0, n, kSwigluGrain, [&](int64_t begin, int64_t end) { swiglu_forward_range(g, u, y, begin, end); });
}

void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, int64_t n) {
  at::parallel_for(0, n, kSwigluGrain,
                   [&](int64_t begin, int64_t end) { swiglu_backward_range(g, u, dy, dg, du, begin, end); });
}

void rotary(const float* x, const float* cos, const float* sin, float* out, const RotaryShape& shape, bool backward) {
  const int64_t rows = shape.batch * shape.heads * shape.t;
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(shape.d, 1)),
                   [&](int64_t begin, int64_t end) { rotary_rows(x, cos, sin, out, begin, end, shape, backward); });
}

void residual_norm_forward(const float* x, const float* h, float* s, float* y, float* mean, float* rstd,
                           const float* w, const float* b, int64_t rows, int64_t d, float eps, bool rms) {
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)), [&](int64_t begin, int64_t end) {
    forward_rows(x, h, s, y, mean, rstd, w, b, begin, end, d, eps, rms);
  });
}

void residual_norm_backward(const float* gy, const float* gs, const float* s, const float* mean, const float* rstd,
                            const float* w, float* gx, float* gw, float* gb, int64_t rows, int64_t d, bool rms) {
  const int64_t per = slice_rows(rows), slices = (rows + per - 1) / per;
  std::vector<float> pw(static_cast<size_t>(slices * d), 0.0f), pb(static_cast<size_t>(slices * d), 0.0f);
  at::parallel_for(0, slices, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      backward_rows(gy, gs, s, mean, rstd, w, gx, pw.data() + k * d, pb.data() + k * d, k * per,
                    std::min(rows, (k + 1) * per), d, rms);
    }
  });
  add_slices(pw.data(), gw, slices, d);
  if (gb != nullptr) add_slices(pb.data(), gb, slices, d);
}

}  // namespace lmkit::nn::kernels::cpu
