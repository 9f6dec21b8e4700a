// GELU's backward pass with the bias gradient of the linear layer before it, in one pass
// over (rows, d): the composite reads gy and pre for gelu_backward, writes gpre, and reads
// gpre again for the bias's column sum. Forward, cuBLASLt adds the bias in its epilogue
// (at::addmm) and ATen's gelu follows (backward needs the pre-activation); nothing to write there.
#include "lmkit/nn/kernels_common.cuh"

namespace lmkit::nn::kernels {

namespace {

// A 32-column tile of one slice of rows: gpre for each element, and the column partials of gbias.
template <typename T>
__global__ void gelu_bias_tiles(const T* gy, const T* pre, T* gpre, float* partials, int64_t rows, int64_t d,
                                int slices, bool tanh_approx) {
  __shared__ float shared[kRowThreads][kColumnTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  const int slice = blockIdx.y;
  const int64_t per = (rows + slices - 1) / slices, first = slice * per;
  const int64_t last = first + per < rows ? first + per : rows;
  float sum = 0.0f;
  if (c < d) {
    for (int64_t row = first + threadIdx.y; row < last; row += kRowThreads) {
      sum += gelu_grad_element(gy, pre, gpre, row * d + c, tanh_approx);
    }
  }
  sum = tile_sum(sum, shared);
  if (partials && threadIdx.y == 0 && c < d) partials[slice * d + c] = sum;
}

}  // namespace

void gelu_bias_backward(const void* gy, const void* pre, void* gpre, Dtype type, float* gbias, float* partials,
                        int64_t rows, int64_t d, bool tanh_approx, void* stream) {
  auto* st = static_cast<cudaStream_t>(stream);
  if (d == 0) return;  // rows == 0 still launches one empty slice, so gbias is written as 0
  const int slices = column_slices(rows);
  const dim3 grid(static_cast<unsigned>((d + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(slices));
  const dim3 block(kColumnTile, kRowThreads);
  if (type == Dtype::kFloat) {
    gelu_bias_tiles<float><<<grid, block, 0, st>>>(static_cast<const float*>(gy), static_cast<const float*>(pre),
                                                   static_cast<float*>(gpre), gbias ? partials : nullptr, rows, d,
                                                   slices, tanh_approx);
  } else {
    gelu_bias_tiles<__nv_bfloat16><<<grid, block, 0, st>>>(
        static_cast<const __nv_bfloat16*>(gy), static_cast<const __nv_bfloat16*>(pre), static_cast<__nv_bfloat16*>(gpre),
        gbias ? partials : nullptr, rows, d, slices, tanh_approx);
  }
  check_launch("lmkit gelu_bias_backward");
  if (gbias) launch_add_partials(partials, gbias, nullptr, slices, d, st);
}

}  // namespace lmkit::nn::kernels
