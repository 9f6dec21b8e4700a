// The fused kernels' scalar math on the host (no GPU needed; built with the kernels):
// Philox4x32-10 equals Random123's known-answer vectors (kat_vectors, philox4x32_10), the
// keep decision drops p of the elements, independently of the offset, and GELU's derivative
// (exact and tanh) equals a central difference of GELU itself.
#include <cmath>
#include <cstdio>

#include "lmkit/nn/kernels_common.cuh"

using lmkit::nn::kernels::Dropout;
using lmkit::nn::kernels::gelu_grad;
using lmkit::nn::kernels::keep;
using lmkit::nn::kernels::philox;

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

// counter (c0, c1, c2, c3) and key (k0, k1) as Random123 writes them: lo = c1:c0, hi = c3:c2, seed = k1:k0.
bool matches(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1, const uint32_t (&want)[4]) {
  const uint64_t group = (static_cast<uint64_t>(c1) << 32) | c0, offset = (static_cast<uint64_t>(c3) << 32) | c2;
  const uint64_t seed = (static_cast<uint64_t>(k1) << 32) | k0;
  for (int lane = 0; lane < 4; ++lane) {
    if (philox(seed, group, offset, lane) != want[lane]) return false;
  }
  return true;
}

}  // namespace

int main() {
  const uint32_t zeros[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
  const uint32_t ones[4] = {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu};
  const uint32_t pi[4] = {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
  expect(matches(0, 0, 0, 0, 0, 0, zeros), "Philox4x32-10 of counter 0, key 0 (Random123 KAT)");
  expect(matches(~0u, ~0u, ~0u, ~0u, ~0u, ~0u, ones), "Philox4x32-10 of counter and key all ones (Random123 KAT)");
  expect(matches(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, pi),
         "Philox4x32-10 of the digits of pi (Random123 KAT)");
  // Dropout at p = 0.1 over 2^20 elements, at two offsets: the rate within 0.002 (about 7 standard errors)
  // and the two masks different (a new call draws a new mask).
  for (uint64_t offset : {uint64_t{0}, uint64_t{4}}) {
    Dropout d;
    d.seed = 1234, d.offset = offset, d.threshold = static_cast<uint32_t>(0.1 * 4294967296.0);
    int64_t dropped = 0;
    for (int64_t i = 0; i < (1 << 20); ++i) dropped += keep(d, i) ? 0 : 1;
    const double rate = static_cast<double>(dropped) / (1 << 20);
    std::printf("offset %llu: dropped %.5f\n", static_cast<unsigned long long>(offset), rate);
    expect(std::fabs(rate - 0.1) < 0.002, "the dropped fraction is p");
  }
  Dropout a, b;
  a.seed = b.seed = 99, a.offset = 0, b.offset = 4, a.threshold = b.threshold = 1u << 31;
  int64_t same = 0;
  for (int64_t i = 0; i < 4096; ++i) same += keep(a, i) == keep(b, i);
  expect(same > 1800 && same < 2300, "masks at two offsets agree on about half the elements");
  Dropout none;
  expect(keep(none, 7), "threshold 0 keeps everything");
  // ATen's counter layout (curand_init(seed, subsequence, offset)): words 0-1 the generator's offset / 4,
  // words 2-3 the subsequence (the element's group of four). Element 4k + j at offset 8 is word j of the
  // block at counter (2, k); the old layout (k, offset) put a call's groups on another call's offsets.
  Dropout layout;
  layout.seed = 77, layout.offset = 8, layout.threshold = 1u << 31;
  bool aten_layout = true;
  for (int64_t i = 0; i < 64; ++i) {
    const bool want = philox(77, 2, static_cast<uint64_t>(i / 4), static_cast<int>(i % 4)) >= (1u << 31);
    aten_layout = aten_layout && keep(layout, i) == want;
  }
  expect(aten_layout, "keep() reads counter (offset / 4, element / 4), ATen's curand_init layout");
  // GELU (Hendrycks & Gimpel): x·Φ(x), and GPT-2's tanh approximation; the derivative against (f(x+h) − f(x−h)) / 2h.
  auto gelu = [](double x, bool tanh_approx) {
    if (tanh_approx) return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  };
  double worst = 0;
  for (bool tanh_approx : {false, true}) {
    for (double x = -8; x <= 8; x += 0.0625) {
      const double h = 1e-4, numeric = (gelu(x + h, tanh_approx) - gelu(x - h, tanh_approx)) / (2 * h);
      worst = std::fmax(worst, std::fabs(gelu_grad(static_cast<float>(x), tanh_approx) - numeric));
    }
  }
  std::printf("gelu': largest difference to the central difference %.2e\n", worst);
  expect(worst < 1e-5, "gelu_grad equals GELU's derivative (exact and tanh) within 1e-5");
  std::printf(failures ? "%d failure(s)\n" : "kernel math: all checks passed\n", failures);
  return failures ? 1 : 0;
}
