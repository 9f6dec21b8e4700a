// The LM head's softmax cross-entropy and its gradient in place over a chunk of logits
// as the matmul wrote them (bf16 under autocast), as llm.c's fused classifier does: one
// read for the online max and sum of exponentials, one read and one write for the
// gradient. The composite it replaces converts the chunk to float32 and makes some eight
// passes over it (log-softmax, gather, exp, scatter, scale, cast).
#include <cfloat>

#include "lmkit/nn/kernels_common.cuh"

namespace lmkit::nn::kernels {

namespace {

constexpr int kThreads = 512;

// (max, Σ exp(z − max)) of two parts of a row.
__device__ __forceinline__ void combine(float& m, float& l, float m2, float l2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) return;
  l = l * expf(m - top) + l2 * expf(m2 - top);
  m = top;
}

// The block's (max, sum, Σ z) in a fixed order: lanes by butterfly, then warps in order.
__device__ void block_softmax_stats(float& m, float& l, float& z) {
  __shared__ float sm[kThreads / 32], sl[kThreads / 32], sz[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
    combine(m, l, m2, l2);
  }
  z = warp_sum(z);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, sl[warp] = l, sz[warp] = z;
  __syncthreads();
  m = -INFINITY, l = 0.0f, z = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) {
    combine(m, l, sm[w], sl[w]);
    z += sz[w];
  }
}

template <typename T>
__global__ void softmax_cross_entropy_rows(T* logits, const int64_t* targets, const float* share, float* loss,
                                           int64_t vocab, int64_t padded, float smoothing) {
  const int64_t row = blockIdx.x;
  T* z = logits + row * padded;
  float m = -INFINITY, l = 0.0f, zsum = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float v = load(z, j);
    if (v > m) {  // one exponential an element (Milakov & Gimelshein 2018, online softmax)
      l = l * expf(m - v) + 1.0f;
      m = v;
    } else {
      l += expf(v - m);
    }
    zsum += v;
  }
  block_softmax_stats(m, l, zsum);
  const float lse = m + logf(l);
  const int64_t t = targets[row];
  const bool valid = t >= 0 && t < vocab;  // out of range: a NaN loss, no read outside the row
  const float zt = valid ? load(z, t) : NAN;
  __syncthreads();  // every thread has read z[t] before any thread overwrites it
  if (threadIdx.x == 0) {
    const float nll = lse - zt;
    loss[row] = smoothing > 0 ? (1.0f - smoothing) * nll + smoothing * (lse - zsum / static_cast<float>(vocab)) : nll;
  }
  const float s = share[row], uniform = smoothing / static_cast<float>(vocab);
  for (int64_t j = threadIdx.x; j < padded; j += kThreads) {
    if (j >= vocab) {
      store(z, j, 0.0f);
      continue;
    }
    float g = expf(load(z, j) - lse) - uniform;
    if (j == t) g -= 1.0f - smoothing;
    store(z, j, s * g);
  }
}

}  // namespace

void softmax_cross_entropy(void* logits, Dtype type, const int64_t* targets, const float* share, float* loss,
                           int64_t rows, int64_t vocab, int64_t padded, float smoothing, void* stream) {
  if (rows == 0) return;
  auto* st = static_cast<cudaStream_t>(stream);
  const auto blocks = static_cast<unsigned>(rows);
  if (type == Dtype::kFloat) {
    softmax_cross_entropy_rows<float><<<blocks, kThreads, 0, st>>>(static_cast<float*>(logits), targets, share, loss,
                                                                    vocab, padded, smoothing);
  } else {
    softmax_cross_entropy_rows<__nv_bfloat16><<<blocks, kThreads, 0, st>>>(static_cast<__nv_bfloat16*>(logits), targets,
                                                                            share, loss, vocab, padded, smoothing);
  }
  check_launch("lmkit softmax_cross_entropy");
}

}  // namespace lmkit::nn::kernels
