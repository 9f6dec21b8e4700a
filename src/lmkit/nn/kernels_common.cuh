// Device helpers shared by lmkit's .cu files: element loads and stores in float32,
// warp and block sums in a fixed order, Philox4x32-10 dropout, the launch check.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "lmkit/nn/kernels.h"

namespace lmkit::nn::kernels {

inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }
// A value as the element type would hold it (what the composite's intermediate tensor rounds to).
__device__ __forceinline__ float round_as(const float*, float v) { return v; }
__device__ __forceinline__ float round_as(const __nv_bfloat16*, float v) { return __bfloat162float(__float2bfloat16(v)); }

// A butterfly sum: every lane ends with the same total, added in the same order on every run.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The high 32 bits of a 32 x 32-bit product (host too: tests/cuda/philox_test.cu checks the stream there).
__host__ __device__ __forceinline__ uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// Salmon et al. 2011, Philox4x32-10: word `lane` of the block at counter (lo, hi) = words
// 0-1 and 2-3, key seed.
__host__ __device__ __forceinline__ uint32_t philox(uint64_t seed, uint64_t lo, uint64_t hi, int lane) {
  uint32_t c0 = static_cast<uint32_t>(lo), c1 = static_cast<uint32_t>(lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(hi), c3 = static_cast<uint32_t>(hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mulhi32(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = mulhi32(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}

// Whether element i survives dropout (Dropout in kernels.h). ATen's layout of the counter
// (curand_init(seed, subsequence, offset)): words 0-1 the generator's offset / 4, words 2-3
// the subsequence, here the element's group of four; so a fused call's draws are the blocks
// an ATen kernel given the same philox_engine_inputs would draw, never another call's.
__host__ __device__ __forceinline__ bool keep(const Dropout& d, int64_t i) {
  if (d.threshold == 0) return true;
  return philox(d.seed, d.offset >> 2, static_cast<uint64_t>(i) >> 2, static_cast<int>(i & 3)) >= d.threshold;
}

// d gelu(x) / dx: exact (erf) GELU, or the tanh approximation (GPT-2's gelu_new).
__host__ __device__ __forceinline__ float gelu_grad(float x, bool tanh_approx) {
  if (tanh_approx) {
    constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
    const float inner = k * (x + 0.044715f * x * x * x);
    const float t = tanhf(inner);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
  }
  constexpr float inv_sqrt2 = 0.7071067811865476f, inv_sqrt_2pi = 0.3989422804014327f;
  return 0.5f * (1.0f + erff(x * inv_sqrt2)) + x * inv_sqrt_2pi * expf(-0.5f * x * x);
}

// Column sums over rows in two fixed-order stages. Stage one: a block of 32 x 8 threads
// owns 32 columns and one slice of rows; thread (x, y) adds rows y, y + 8, ... of its
// slice, the 8 partial sums are added in order, and the block writes one partial per
// column. Stage two adds the slices' partials in order.
constexpr int kColumnTile = 32, kRowThreads = 8, kMaxSlices = 256;

inline int column_slices(int64_t rows) {
  const int64_t per = 64;  // at least 64 rows a slice
  const int64_t s = (rows + per - 1) / per;
  return static_cast<int>(s < 1 ? 1 : s > kMaxSlices ? kMaxSlices : s);
}

// Adds the 8 row-threads' values of each column in order; thread y == 0 holds the sum.
__device__ __forceinline__ float tile_sum(float v, float (*shared)[kColumnTile + 1]) {
  shared[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.y == 0) {
    for (int r = 0; r < kRowThreads; ++r) total += shared[r][threadIdx.x];
  }
  __syncthreads();
  return total;
}

// partials: (sums, slices, d) → out[k][c] = Σ_slice partials[k][slice][c], for each of `sums` sums.
static __global__ void add_partials(const float* partials, float* out0, float* out1, int slices, int64_t d) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= d) return;
  float a = 0.0f, b = 0.0f;
  for (int s = 0; s < slices; ++s) {
    a += partials[s * d + c];
    if (out1) b += partials[(slices + s) * d + c];
  }
  if (out0) out0[c] = a;
  if (out1) out1[c] = b;
}

static void launch_add_partials(const float* partials, float* out0, float* out1, int slices, int64_t d,
                                cudaStream_t stream) {
  add_partials<<<static_cast<unsigned>((d + 255) / 256), 256, 0, stream>>>(partials, out0, out1, slices, d);
  check_launch("lmkit column sums");
}

}  // namespace lmkit::nn::kernels
