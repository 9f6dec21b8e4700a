#include "lmkit/nn/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"
#include "lmkit/core/simd.h"

namespace lmkit::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kBlock = 1024;  // elements per block of random words (4 per 64-bit word)

uint64_t draw_seed() {
  auto* gen = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->random64();
}

// SplitMix64 outputs for words [first, first + count): word w is
// splitmix64(seed + (w + 1)·golden), a counter-based stream any thread can start anywhere.
LMKIT_MULTIVERSION void random_words(uint64_t seed, int64_t first, int64_t count, uint64_t* out) {
  for (int64_t j = 0; j < count; ++j) {
    uint64_t z = seed + static_cast<uint64_t>(first + j + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    out[j] = z ^ (z >> 31);
  }
}

// Element i is kept when 16-bit lane i of the little-endian word stream is >= threshold.
template <typename T>
LMKIT_MULTIVERSION void apply_mask(const T* x, T* y, uint8_t* mask, const uint16_t* lanes, int64_t n,
                                   uint16_t threshold, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = lanes[i] >= threshold;
    mask[i] = keep;
    y[i] = static_cast<T>(keep ? static_cast<float>(x[i]) * scale : 0.0f);
  }
}

template <typename T>
LMKIT_MULTIVERSION void masked_scale(const T* g, const uint8_t* mask, T* out, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(mask[i] ? static_cast<float>(g[i]) * scale : 0.0f);
}

template <typename T>
void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t seed, uint16_t threshold,
                            float scale) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    uint64_t words[kBlock / 4];
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kBlock, count = std::min(kBlock, n - first);
      random_words(seed, first / 4, (count + 3) / 4, words);
      uint16_t lanes[kBlock];
      std::memcpy(lanes, words, sizeof(lanes));  // lane k of word w is element 4w + k (little-endian)
      apply_mask<T>(x + first, y + first, mask + first, lanes, count, threshold, scale);
    }
  });
}

template <typename T>
void dropout_backward_kernel(const T* g, const uint8_t* mask, T* out, int64_t n, float scale) {
  at::parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    masked_scale<T>(g + begin, mask + begin, out + begin, end - begin, scale);
  });
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, int64_t threshold) {
    const at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
    at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kByte));
    const float scale = static_cast<float>(65536.0 / static_cast<double>(65536 - threshold));
    const uint64_t seed = draw_seed();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "lmkit_dropout", [&] {
      dropout_forward_kernel<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), mask.data_ptr<uint8_t>(),
                                       x.numel(), seed, static_cast<uint16_t>(threshold), scale);
    });
    ctx->save_for_backward({mask});
    ctx->saved_data["scale"] = static_cast<double>(scale);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor mask = ctx->get_saved_variables()[0];
    const float scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const at::Tensor g = grad_outputs[0].contiguous();
    at::Tensor out = at::empty_like(g, at::MemoryFormat::Contiguous);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, g.scalar_type(), "lmkit_dropout_backward", [&] {
      dropout_backward_kernel<scalar_t>(g.data_ptr<scalar_t>(), mask.data_ptr<uint8_t>(), out.data_ptr<scalar_t>(),
                                        g.numel(), scale);
    });
    return {out, at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p, bool training) {
  check_input(p >= 0.0 && p <= 1.0, "dropout: probability " + std::to_string(p) + " is not in [0, 1]");
  if (!training || p == 0.0) return x;
  if (!x.device().is_cpu() || !at::isFloatingType(x.scalar_type()) || lever_disabled("dropout")) {
    return at::dropout(x, p, true);
  }
  const auto threshold = static_cast<int64_t>(std::lround(p * 65536.0));
  if (threshold >= 65536) return x * 0;
  if (threshold == 0) return x;
  return DropoutFunction::apply(x, threshold);
}

}  // namespace lmkit::nn
