#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/nn/position.h"

using lmkit::nn::alibi_bias;
using lmkit::nn::alibi_slopes;

TEST_CASE("alibi: slopes follow Press et al.'s rule for powers of two and HF's interleave beyond", "[models][alibi]") {
  // 8 heads: 2^-1 .. 2^-8. 6 heads: 4 of the rule for 4 (2^-2 .. 2^-8), then 2 of the rule for 8 at odd powers.
  const at::Tensor eight = alibi_slopes(8);
  for (int64_t i = 0; i < 8; ++i) CHECK(eight[i].item<float>() == Approx(std::pow(0.5, i + 1)).epsilon(1e-7));
  const std::vector<double> six = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  const at::Tensor got = alibi_slopes(6);
  REQUIRE(got.size(0) == 6);
  for (int64_t i = 0; i < 6; ++i) CHECK(got[i].item<float>() == Approx(six[static_cast<size_t>(i)]).epsilon(1e-7));
  CHECK(alibi_slopes(1).item<float>() == Approx(std::pow(2.0, -8)).epsilon(1e-7));
}

TEST_CASE("alibi: a key's position counts the real tokens before it", "[models][alibi]") {
  const at::Tensor mask = at::tensor({0, 0, 1, 1, 1, 1, 1, 0}, at::kLong).view({2, 4});  // left- and right-padded
  const at::Tensor bias = alibi_bias(at::tensor({0.5f, 0.25f}), mask, 4, at::kFloat, at::kCPU);
  REQUIRE(bias.sizes() == at::IntArrayRef({2, 2, 1, 4}));
  CHECK(at::equal(bias[0][0].view({4}), at::tensor({0.0f, 0.0f, 0.0f, 0.5f})));
  CHECK(at::equal(bias[1][1].view({4}), at::tensor({0.0f, 0.25f, 0.5f, 0.0f})));
  const at::Tensor unmasked = alibi_bias(at::tensor({0.5f}), {}, 3, at::kFloat, at::kCPU);
  CHECK(at::equal(unmasked.view({3}), at::tensor({0.0f, 0.5f, 1.0f})));
}
