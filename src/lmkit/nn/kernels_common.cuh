// Device helpers shared by lmkit's .cu files: bf16 elements (Elem, kernel_rows.h), warp and
// block sums in a fixed order, column sums, the launch check. The per-row math (Philox
// dropout, the norms, GELU's derivative, the softmax) is kernel_rows.h's, shared with the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "lmkit/nn/kernel_rows.h"
#include "lmkit/nn/kernels.h"

namespace lmkit::nn::kernels {

template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16(v); }
  static __device__ __forceinline__ float round(float v) { return __bfloat162float(__float2bfloat16(v)); }
};

inline void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A butterfly sum: every lane ends with the same total, added in the same order on every run.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
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

// partials: (sums, slices, d) → out[k][c] = Σ_slice partials[k][slice][c], for each of `sums` sums:
// a 32-column tile a block, its 8 row-threads taking every 8th slice, added in order.
static __global__ void add_partials(const float* partials, float* out0, float* out1, int slices, int64_t d) {
  __shared__ float shared[kRowThreads][kColumnTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  float a = 0.0f, b = 0.0f;
  if (c < d) {
    for (int s = threadIdx.y; s < slices; s += kRowThreads) {
      a += partials[s * d + c];
      if (out1) b += partials[(slices + s) * d + c];
    }
  }
  a = tile_sum(a, shared);
  b = tile_sum(b, shared);
  if (threadIdx.y == 0 && c < d) {
    if (out0) out0[c] = a;
    if (out1) out1[c] = b;
  }
}

static void launch_add_partials(const float* partials, float* out0, float* out1, int slices, int64_t d,
                                cudaStream_t stream) {
  add_partials<<<static_cast<unsigned>((d + kColumnTile - 1) / kColumnTile), dim3(kColumnTile, kRowThreads), 0,
                 stream>>>(partials, out0, out1, slices, d);
  check_launch("lmkit column sums");
}

}  // namespace lmkit::nn::kernels
