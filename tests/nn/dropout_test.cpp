#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "lmkit/nn/dropout.h"

using namespace lmkit;

TEST_CASE("dropout: drops p of the elements and scales the rest so the mean is kept", "[nn][dropout]") {
  at::manual_seed(3);
  const at::Tensor x = at::ones({1000, 1000});
  for (double p : {0.1, 0.5}) {
    const at::Tensor y = nn::dropout(x, p, true);
    const double dropped = y.eq(0).to(at::kDouble).mean().item<double>();
    CHECK(dropped == Approx(p).margin(0.002));  // 1e6 draws: standard error 3e-4 at p = 0.5
    const double kept_value = y.max().item<double>();
    CHECK(kept_value == Approx(1.0 / (1.0 - p)).epsilon(1e-4));
    CHECK(y.mean().item<double>() == Approx(1.0).margin(0.005));
    // Rows and columns are not correlated with the position inside a 64-bit draw.
    for (int lane = 0; lane < 4; ++lane) {
      const double lane_rate = y.view({-1, 4}).select(1, lane).eq(0).to(at::kDouble).mean().item<double>();
      CHECK(lane_rate == Approx(p).margin(0.004));
    }
  }
  CHECK(at::equal(nn::dropout(x, 0.0, true), x));
  CHECK(at::equal(nn::dropout(x, 0.3, false), x));
  CHECK(nn::dropout(x, 1.0, true).abs().sum().item<double>() == 0.0);
  CHECK_THROWS_WITH(nn::dropout(x, 1.5, true), Catch::Contains("not in [0, 1]"));
}

TEST_CASE("dropout: follows manual_seed, differs call to call, and is the same for any thread count",
          "[nn][dropout]") {
  const at::Tensor x = at::randn({64, 333});
  const int threads = at::get_num_threads();
  at::manual_seed(11);
  const at::Tensor a = nn::dropout(x, 0.2, true), b = nn::dropout(x, 0.2, true);
  CHECK_FALSE(at::equal(a, b));
  at::set_num_threads(1);
  at::manual_seed(11);
  const at::Tensor a1 = nn::dropout(x, 0.2, true);
  at::set_num_threads(threads);
  CHECK(at::equal(a, a1));
}

TEST_CASE("dropout: the gradient is the same mask and scale, for float, bf16 and strided input", "[nn][dropout]") {
  at::manual_seed(5);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
    const at::Tensor x = at::randn({8, 6, 10}).to(dtype).transpose(0, 2).requires_grad_();  // not contiguous
    const at::Tensor y = nn::dropout(x, 0.25, true);
    CHECK(y.scalar_type() == dtype);
    CHECK(y.sizes() == x.sizes());
    const at::Tensor w = at::randn(x.sizes()).to(dtype);
    (y * w).sum().backward();
    // dy/dx is the mask times 1/(1-p): zero exactly where y is zero, 1/(1-p) elsewhere.
    const at::Tensor kept = y.ne(0).to(dtype);
    const at::Tensor expected = w * kept * (1.0 / 0.75);
    CHECK(at::allclose(x.grad().to(at::kFloat), expected.to(at::kFloat), 1e-2, 1e-3));
    // Kept elements are the input scaled.
    CHECK(at::allclose((y * kept).to(at::kFloat), (x.detach() * kept / 0.75).to(at::kFloat), 1e-2, 1e-3));
  }
}
