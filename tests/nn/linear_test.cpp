#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "lmkit/nn/linear.h"

using namespace lmkit;

TEST_CASE("nn::linear: the single-row path equals at::linear, with and without bias, and has gradients",
          "[nn][linear]") {
  at::manual_seed(9);
  const at::Tensor w = at::randn({37, 16}).requires_grad_(), b = at::randn({37}).requires_grad_();
  for (auto shape : {std::vector<int64_t>{16}, std::vector<int64_t>{1, 16}, std::vector<int64_t>{1, 1, 16},
                     std::vector<int64_t>{3, 5, 16}}) {
    const at::Tensor x = at::randn(shape);
    for (bool with_bias : {true, false}) {
      const at::Tensor bias = with_bias ? b : at::Tensor();
      const at::Tensor y = nn::linear(x, w, bias), expected = at::linear(x, w, bias);
      REQUIRE(y.sizes() == expected.sizes());
      CHECK(at::allclose(y, expected, 1e-5, 1e-5));
      const at::Tensor gw = torch::autograd::grad({y.sum()}, {w})[0], ew = torch::autograd::grad({expected.sum()}, {w})[0];
      CHECK(at::allclose(gw, ew, 1e-5, 1e-5));
    }
  }
}
