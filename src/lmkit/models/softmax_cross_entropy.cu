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

// The block's (max, sum, Σ z) in a fixed order: lanes by butterfly, then warps in order.
__device__ void block_softmax_stats(float& m, float& l, float& z) {
  __shared__ float sm[kThreads / 32], sl[kThreads / 32], sz[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
    softmax_combine(m, l, m2, l2);
  }
  z = warp_sum(z);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, sl[warp] = l, sz[warp] = z;
  __syncthreads();
  m = -INFINITY, l = 0.0f, z = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) {
    softmax_combine(m, l, sm[w], sl[w]);
    z += sz[w];
  }
}

struct BlockStats {
  __device__ void operator()(float& m, float& l, float& z) const { block_softmax_stats(m, l, z); }
};
struct BlockBarrier {
  __device__ void operator()() const { __syncthreads(); }
};

// One block a row: kernel_rows.h's row math with kThreads workers.
template <typename T>
__global__ void softmax_cross_entropy_rows(T* logits, const int64_t* targets, const float* share, float* loss,
                                           int64_t vocab, int64_t padded, float smoothing) {
  const int64_t row = blockIdx.x;
  softmax_cross_entropy_row(logits + row * padded, targets[row], share[row], loss + row, vocab, padded, smoothing,
                            static_cast<int>(threadIdx.x), kThreads, BlockStats{}, BlockBarrier{});
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
