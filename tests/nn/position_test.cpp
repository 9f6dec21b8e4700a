#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/nn/position.h"
#include "test_util.h"

using lmkit::nn::relative_position_bucket;

TEST_CASE("positions: the sinusoidal table equals the formula", "[nn][position]") {
  const int64_t length = 50, dim = 16;
  at::Tensor table = lmkit::nn::sinusoidal_table(length, dim);
  REQUIRE(table.sizes() == at::IntArrayRef({length, dim}));
  auto acc = table.accessor<float, 2>();
  double worst = 0;
  for (int64_t pos = 0; pos < length; ++pos) {
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / dim);
      worst = std::max(worst, std::abs(acc[pos][2 * i] - std::sin(angle)));
      worst = std::max(worst, std::abs(acc[pos][2 * i + 1] - std::cos(angle)));
    }
  }
  CHECK(worst < 1e-6);
  CHECK(table[0][0].item<float>() == 0.0f);
  CHECK(table[0][1].item<float>() == 1.0f);
  // odd widths keep the last sine column
  CHECK(lmkit::nn::sinusoidal_table(4, 5).sizes() == at::IntArrayRef({4, 5}));
}

TEST_CASE("positions: sinusoidal and learned modules slice by offset and refuse overlong input", "[nn][position]") {
  lmkit::nn::SinusoidalPositions sin(10, 8);
  CHECK(at::equal(sin(3, 2), lmkit::nn::sinusoidal_table(10, 8).slice(0, 2, 5)));
  CHECK_THROWS_WITH(sin(11), Catch::Contains("exceeds the model's 10"));
  lmkit::nn::LearnedPositions learned(6, 4);
  CHECK(at::equal(learned(2, 4), learned->weight.slice(0, 4, 6)));
  CHECK_THROWS_WITH(learned(3, 4), Catch::Contains("max_position_embeddings"));
}

TEST_CASE("positions: relative buckets match known values (bidirectional 32 buckets max 128)", "[nn][position]") {
  // Values worked by hand from Raffel et al.'s scheme: 16 buckets per direction,
  // 8 exact, 8 logarithmic up to distance 128; positive (key after query) in 16..31.
  std::vector<std::pair<int64_t, int64_t>> known{{0, 0},     {-1, 1},   {1, 17},   {-7, 7},   {7, 23},
                                                  {-8, 8},    {-20, 10}, {20, 26},  {-50, 13}, {-127, 15},
                                                  {-128, 15}, {-1000, 15}, {1000, 31}};
  std::vector<int64_t> rel, expected;
  for (auto& kv : known) rel.push_back(kv.first), expected.push_back(kv.second);
  at::Tensor got = relative_position_bucket(at::tensor(rel, at::kLong), true, 32, 128);
  CHECK(at::equal(got, at::tensor(expected, at::kLong)));
}

TEST_CASE("positions: relative buckets match known values (causal 32 buckets max 128)", "[nn][position]") {
  // Causal: the future (positive) all maps to bucket 0; 16 exact, 16 logarithmic.
  std::vector<std::pair<int64_t, int64_t>> known{{5, 0},   {0, 0},    {-5, 5},   {-15, 15}, {-16, 16},
                                                  {-20, 17}, {-100, 30}, {-200, 31}, {-5000, 31}};
  std::vector<int64_t> rel, expected;
  for (auto& kv : known) rel.push_back(kv.first), expected.push_back(kv.second);
  at::Tensor got = relative_position_bucket(at::tensor(rel, at::kLong), false, 32, 128);
  CHECK(at::equal(got, at::tensor(expected, at::kLong)));
}

TEST_CASE("positions: relative bias has shape 1 x H x q x k and follows the last queries when cached", "[nn][position]") {
  lmkit::nn::RelativePositionBias bias(lmkit::nn::RelativePositionBiasOptions(3).bidirectional(false));
  at::Tensor full = bias(6, 6);
  REQUIRE(full.sizes() == at::IntArrayRef({1, 3, 6, 6}));
  CHECK(at::equal(bias(1, 6), full.slice(2, 5, 6)));
  // Entry (i, j) is the embedding of bucket(j - i) for each head.
  at::Tensor w = bias->embedding->weight;  // (32, 3)
  CHECK(at::equal(full[0].select(1, 4).select(1, 1), w[3]));  // rel = 1 - 4 = -3 -> bucket 3
}
