// The fused kernels' entry points on the host (kernels.h, namespace host): kernel_rows.h's
// row math with one worker a row, so that the fused ops' autograd wiring (saved tensors,
// gradient count, dtypes, the replayed dropout mask) and the row math itself are checked
// against LibTorch's CPU autograd without a GPU. Rows run in parallel (at::parallel_for);
// column sums in row order. Tests switch this path on (nn::set_host_kernels_enabled).
#include <c10/util/BFloat16.h>

#include <ATen/Parallel.h>

#include <type_traits>
#include <vector>

#include "lmkit/nn/kernel_rows.h"
#include "lmkit/nn/kernels.h"

namespace lmkit::nn::kernels {

template <>
struct Elem<c10::BFloat16> {
  static float load(const c10::BFloat16* p, int64_t i) { return static_cast<float>(p[i]); }
  static void store(c10::BFloat16* p, int64_t i, float v) { p[i] = c10::BFloat16(v); }  // round to nearest even
  static float round(float v) { return static_cast<float>(c10::BFloat16(v)); }
};

namespace host {

namespace {

// One worker a row: a row's sum is its only worker's.
struct Alone {
  float operator()(float v) const { return v; }
};
struct AloneStats {
  void operator()(float&, float&, float&) const {}
};
struct NoBarrier {
  void operator()() const {}
};

template <typename Fn>
void with_type(Dtype t, Fn&& fn) {
  if (t == Dtype::kFloat) {
    fn(static_cast<float*>(nullptr));
  } else {
    fn(static_cast<c10::BFloat16*>(nullptr));
  }
}

template <typename Fn>
void each_row(int64_t rows, Fn&& fn) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

}  // namespace

void residual_norm_forward(const void* x, Dtype x_type, const void* h, Dtype h_type, void* s, Dtype s_type, void* y,
                           Dtype y_type, float* mean, float* rstd, const float* w, const float* b, int64_t rows,
                           int64_t d, float eps, bool rms, Dropout dropout) {
  with_type(x_type, [&](auto* xt) {
    with_type(h_type, [&](auto* ht) {
      with_type(s_type, [&](auto* st) {
        with_type(y_type, [&](auto* yt) {
          using TX = std::remove_pointer_t<decltype(xt)>;
          using TH = std::remove_pointer_t<decltype(ht)>;
          using TS = std::remove_pointer_t<decltype(st)>;
          using TY = std::remove_pointer_t<decltype(yt)>;
          each_row(rows, [&](int64_t row) {
            residual_norm_forward_row(static_cast<const TX*>(x), static_cast<const TH*>(h), static_cast<TS*>(s),
                                      static_cast<TY*>(y), mean, rstd, w, b, row, d, eps, rms, dropout, 0, 1, Alone{});
          });
        });
      });
    });
  });
}

void residual_norm_backward(const void* gy_in, Dtype gy_type, const void* gs, const void* s, Dtype s_type,
                            const float* mean, const float* rstd, const float* w, void* gx, Dtype x_type, void* gh,
                            Dtype h_type, float* gw, float* gb, int64_t rows, int64_t d, bool rms, Dropout dropout) {
  with_type(x_type, [&](auto* xt) {
    with_type(h_type, [&](auto* ht) {
      with_type(s_type, [&](auto* sp) {
        with_type(gy_type, [&](auto* gt) {
          using TX = std::remove_pointer_t<decltype(xt)>;
          using TH = std::remove_pointer_t<decltype(ht)>;
          using TS = std::remove_pointer_t<decltype(sp)>;
          using TG = std::remove_pointer_t<decltype(gt)>;
          const auto* gy = static_cast<const TG*>(gy_in);
          each_row(rows, [&](int64_t row) {
            residual_norm_backward_row(gy, static_cast<const TS*>(gs), static_cast<const TS*>(s), mean, rstd, w,
                                       static_cast<TX*>(gx), static_cast<TH*>(gh), row, d, rms, dropout, 0, 1, Alone{});
          });
          // gw = Σ_rows gy·xhat, gb = Σ_rows gy (the GPU's column sums, in row order).
          std::vector<float> sw(d, 0.0f), sb(d, 0.0f);
          for (int64_t row = 0; row < rows; ++row) {
            for (int64_t c = 0; c < d; ++c) {
              const float g = Elem<TG>::load(gy, row * d + c);
              sw[c] += g * (Elem<TS>::load(static_cast<const TS*>(s), row * d + c) - mean[row]) * rstd[row];
              sb[c] += g;
            }
          }
          for (int64_t c = 0; c < d; ++c) {
            gw[c] = sw[c];
            if (gb) gb[c] = sb[c];
          }
        });
      });
    });
  });
}

void gelu_bias_backward(const void* gy, const void* pre, void* gpre, Dtype type, float* gbias, int64_t rows, int64_t d,
                        bool tanh) {
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    std::vector<float> sum(d, 0.0f);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < d; ++c) {
        sum[c] += gelu_grad_element(static_cast<const T*>(gy), static_cast<const T*>(pre), static_cast<T*>(gpre),
                                    row * d + c, tanh);
      }
    }
    if (gbias) {
      for (int64_t c = 0; c < d; ++c) gbias[c] = sum[c];
    }
  });
}

void softmax_cross_entropy(void* logits, Dtype type, const int64_t* targets, const float* share, float* loss,
                           int64_t rows, int64_t vocab, int64_t padded, float smoothing) {
  with_type(type, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    each_row(rows, [&](int64_t row) {
      softmax_cross_entropy_row(static_cast<T*>(logits) + row * padded, targets[row], share[row], loss + row, vocab,
                                padded, smoothing, 0, 1, AloneStats{}, NoBarrier{});
    });
  });
}

}  // namespace host

}  // namespace lmkit::nn::kernels
