// Residual add + dropout + LayerNorm/RMSNorm in one pass over the row, forward and
// backward (as llm.c fuses the residual into its layernorm kernels): the composite it
// replaces reads and writes the (rows, d) activations five times forward and more backward.
// One warp per row; the dropout mask is not stored but drawn again in the backward pass.
#include "lmkit/nn/kernels_common.cuh"

namespace lmkit::nn::kernels {

namespace {

struct WarpSum {
  __device__ float operator()(float v) const { return warp_sum(v); }
};

// One warp a row: kernel_rows.h's row math with 32 workers.
template <typename TX, typename TH, typename TS, typename TY>
__global__ void forward_rows(const TX* x, const TH* h, TS* s, TY* y, float* mean_out, float* rstd_out,
                             const float* w, const float* b, int64_t rows, int64_t d, float eps, bool rms,
                             Dropout dropout) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= rows) return;
  residual_norm_forward_row(x, h, s, y, mean_out, rstd_out, w, b, row, d, eps, rms, dropout,
                            static_cast<int>(threadIdx.x % 32), 32, WarpSum{});
}

template <typename TX, typename TH, typename TS, typename TG>
__global__ void backward_rows(const TG* gy, const TS* gs, const TS* s, const float* mean, const float* rstd,
                              const float* w, TX* gx, TH* gh, int64_t rows, int64_t d, bool rms, Dropout dropout) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (row >= rows) return;
  residual_norm_backward_row(gy, gs, s, mean, rstd, w, gx, gh, row, d, rms, dropout,
                             static_cast<int>(threadIdx.x % 32), 32, WarpSum{});
}

// gw = Σ_rows gy·xhat and gb = Σ_rows gy: stage one of the column sums (kernels_common.cuh).
template <typename TS, typename TG>
__global__ void weight_partials(const TG* gy, const TS* s, const float* mean, const float* rstd, float* partials,
                                int64_t rows, int64_t d, int slices) {
  __shared__ float shared[kRowThreads][kColumnTile + 1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  const int slice = blockIdx.y;
  const int64_t per = (rows + slices - 1) / slices, first = slice * per;
  const int64_t last = first + per < rows ? first + per : rows;
  float gw = 0.0f, gb = 0.0f;
  if (c < d) {
    for (int64_t row = first + threadIdx.y; row < last; row += kRowThreads) {
      const float g = Elem<TG>::load(gy, row * d + c);
      gw += g * (Elem<TS>::load(s, row * d + c) - mean[row]) * rstd[row];
      gb += g;
    }
  }
  gw = tile_sum(gw, shared);
  gb = tile_sum(gb, shared);
  if (threadIdx.y == 0 && c < d) {
    partials[slice * d + c] = gw;
    partials[(slices + slice) * d + c] = gb;
  }
}

// Calls fn with a typed null pointer for each runtime element type.
template <typename Fn>
void with_type(Dtype t, Fn&& fn) {
  if (t == Dtype::kFloat) {
    fn(static_cast<float*>(nullptr));
  } else {
    fn(static_cast<__nv_bfloat16*>(nullptr));
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows * 32 + 255) / 256); }

}  // namespace

void residual_norm_forward(const void* x, Dtype x_type, const void* h, Dtype h_type, void* s, Dtype s_type, void* y,
                           Dtype y_type, float* mean, float* rstd, const float* w, const float* b, int64_t rows,
                           int64_t d, float eps, bool rms, Dropout dropout, void* stream) {
  if (rows == 0) return;  // a zero grid is a launch error
  with_type(x_type, [&](auto* xt) {
    with_type(h_type, [&](auto* ht) {
      with_type(s_type, [&](auto* st) {
        with_type(y_type, [&](auto* yt) {
          using TX = std::remove_pointer_t<decltype(xt)>;
          using TH = std::remove_pointer_t<decltype(ht)>;
          using TS = std::remove_pointer_t<decltype(st)>;
          using TY = std::remove_pointer_t<decltype(yt)>;
          forward_rows<TX, TH, TS, TY><<<row_blocks(rows), 256, 0, static_cast<cudaStream_t>(stream)>>>(
              static_cast<const TX*>(x), static_cast<const TH*>(h), static_cast<TS*>(s), static_cast<TY*>(y), mean,
              rstd, w, b, rows, d, eps, rms, dropout);
        });
      });
    });
  });
  check_launch("lmkit residual_norm_forward");
}

int64_t column_partials_size(int64_t rows, int64_t d) { return 2 * static_cast<int64_t>(column_slices(rows)) * d; }

void residual_norm_backward(const void* gy, Dtype gy_type, const void* gs, const void* s, Dtype s_type,
                            const float* mean, const float* rstd, const float* w, void* gx, Dtype x_type, void* gh,
                            Dtype h_type, float* gw, float* gb, float* partials, int64_t rows, int64_t d, bool rms,
                            Dropout dropout, void* stream) {
  auto* st = static_cast<cudaStream_t>(stream);
  if (rows > 0) {  // a zero grid is a launch error; the column sums below still write gw, gb = 0
  with_type(x_type, [&](auto* xt) {
    with_type(h_type, [&](auto* ht) {
      with_type(s_type, [&](auto* sp) {
        with_type(gy_type, [&](auto* gt) {
          using TX = std::remove_pointer_t<decltype(xt)>;
          using TH = std::remove_pointer_t<decltype(ht)>;
          using TS = std::remove_pointer_t<decltype(sp)>;
          using TG = std::remove_pointer_t<decltype(gt)>;
          backward_rows<TX, TH, TS, TG><<<row_blocks(rows), 256, 0, st>>>(
              static_cast<const TG*>(gy), static_cast<const TS*>(gs), static_cast<const TS*>(s), mean, rstd, w,
              static_cast<TX*>(gx), static_cast<TH*>(gh), rows, d, rms, dropout);
        });
      });
    });
  });
  check_launch("lmkit residual_norm_backward");
  }
  if (d == 0) return;
  const int slices = column_slices(rows);
  const dim3 grid(static_cast<unsigned>((d + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(slices));
  with_type(s_type, [&](auto* sp) {
    with_type(gy_type, [&](auto* gt) {
      using TS = std::remove_pointer_t<decltype(sp)>;
      using TG = std::remove_pointer_t<decltype(gt)>;
      weight_partials<TS, TG><<<grid, dim3(kColumnTile, kRowThreads), 0, st>>>(
          static_cast<const TG*>(gy), static_cast<const TS*>(s), mean, rstd, partials, rows, d, slices);
    });
  });
  check_launch("lmkit residual_norm_backward (weights)");
  launch_add_partials(partials, gw, rms ? nullptr : gb, slices, d, st);
}

}  // namespace lmkit::nn::kernels
