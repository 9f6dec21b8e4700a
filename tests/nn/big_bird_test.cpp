#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/models/model.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/recompute.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json big_bird_config(const std::string& attention_type = "block_sparse") {
  return {{"model_type", "big_bird"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 64},
          {"block_size", 2}, {"num_random_blocks", 1}, {"attention_type", attention_type}};
}

Batch big_bird_batch(int64_t t, int64_t real) { return test::right_padded_batch(64, t, real, 0); }

}  // namespace

TEST_CASE("big_bird: block-sparse attention equals full attention under the mask of its blocks", "[nn][big_bird]") {
  at::manual_seed(4);
  const int64_t bs = 3, nb = 8, t = bs * nb, h = 2, r = 2;
  const at::Tensor q = at::randn({2, h, t, 8}, at::kDouble), k = at::randn({2, h, t, 8}, at::kDouble);
  const at::Tensor v = at::randn({2, h, t, 8}, at::kDouble);
  at::Tensor real = at::ones({2, t}, at::kBool);
  real[1].slice(0, 17).fill_(false);
  const at::Tensor random = nn::draw_random_blocks(h, nb, r, at::kCPU);  // (H, nb - 2, r)
  const at::Tensor got = nn::block_sparse_attention(q, k, v, real, bs, random, 0.4);
  // The dense mask: query block i sees blocks 0, nb - 1, i - 1 .. i + 1 and its random ones; the first and last see all.
  at::Tensor sees = at::zeros({h, nb, nb}, at::kBool);
  for (int64_t head = 0; head < h; ++head) {
    for (int64_t i = 0; i < nb; ++i) {
      for (int64_t j = 0; j < nb; ++j) {
        const bool fixed = i == 0 || i == nb - 1 || j == 0 || j == nb - 1 || std::abs(i - j) <= 1;
        bool drawn = false;
        for (int64_t c = 0; c < r && i > 0 && i < nb - 1; ++c) drawn |= random[head][i - 1][c].item<int64_t>() == j;
        sees[head][i][j] = fixed || drawn;
      }
    }
  }
  const at::Tensor blockwise = sees.repeat_interleave(bs, 1).repeat_interleave(bs, 2);  // (H, T, T)
  const at::Tensor allowed = blockwise.unsqueeze(0).logical_and(real.view({2, 1, 1, t}));
  const at::Tensor bias = at::where(allowed, at::zeros({}, at::kDouble), at::full({}, nn::mask_value(at::kDouble), at::kDouble));
  const at::Tensor want = nn::scaled_dot_product(q, k, v, bias, 0.4, 0.0, false) * real.view({2, 1, t, 1});
  CHECK(test::max_abs_diff(got, want) < 1e-12);
}

TEST_CASE("big_bird: random blocks skip the window and the global blocks, come from lmkit's generator and replay under recomputation", "[nn][big_bird]") {
  at::manual_seed(11);
  const at::Tensor a = nn::draw_random_blocks(3, 12, 3, at::kCPU);
  at::manual_seed(11);
  CHECK(at::equal(a, nn::draw_random_blocks(3, 12, 3, at::kCPU)));
  for (int64_t head = 0; head < 3; ++head) {
    for (int64_t i = 1; i <= 10; ++i) {
      std::set<int64_t> seen;
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t j = a[head][i - 1][c].item<int64_t>();
        CHECK(j >= 1);
        CHECK(j <= 10);
        CHECK(std::abs(j - i) > 1);
        seen.insert(j);
      }
      CHECK(seen.size() == 3);
    }
  }
  // A training step draws its blocks: the same seed gives the same loss, another seed another.
  auto model = models::create_model(big_bird_config(), "b.json", "BigBirdForMaskedLM");
  model->train();
  Batch b = big_bird_batch(30, 30);
  b.labels = b.input_ids.clone();
  auto loss = [&](uint64_t seed) {
    at::manual_seed(seed);
    return model->forward(b).loss.item<double>();
  };
  CHECK(loss(3) == loss(3));
  CHECK(loss(3) != loss(4));
  // Recomputation replays the generator: the same blocks, the same gradients.
  auto gradients = [&](bool recompute) {
    nn::RecomputeScope scope(recompute);
    model->zero_grad();
    at::manual_seed(5);
    model->forward(b).loss.backward();
    std::vector<at::Tensor> g;
    for (const auto& p : model->parameters()) {
      if (p.grad().defined()) g.push_back(p.grad().clone());  // the pooler takes no part in the masked LM
    }
    return g;
  };
  const auto stored = gradients(false), recomputed = gradients(true);
  REQUIRE(stored.size() == recomputed.size());
  for (size_t i = 0; i < stored.size(); ++i) CHECK(at::equal(stored[i], recomputed[i]));
}

TEST_CASE("big_bird: an input within (5 + 2r) blocks takes full attention, a longer one block-sparse", "[models][big_bird]") {
  at::manual_seed(6);
  auto sparse = models::create_model(big_bird_config(), "b.json", "BigBirdForMaskedLM");
  auto full = models::create_model(big_bird_config("original_full"), "f.json", "BigBirdForMaskedLM");
  {
    at::NoGradGuard no_grad;
    auto params = sparse->named_parameters();
    for (auto& p : full->named_parameters()) p.value().copy_(params[p.key()]);
  }
  sparse->eval(), full->eval();
  const Batch within = big_bird_batch(14, 14);  // (5 + 2·1)·2 = 14
  CHECK(test::max_abs_diff(sparse->forward(within).logits, full->forward(within).logits) < 1e-5);
  const Batch longer = big_bird_batch(31, 25);  // 16 blocks once padded to 32
  CHECK(test::max_abs_diff(sparse->forward(longer).logits, full->forward(longer).logits) > 1e-3);
  CHECK(full->config_json()["attention_type"] == "original_full");
}

TEST_CASE("big_bird: random blocks of another shape, a block size of 0, an unknown attention type: named input errors",
          "[models][big_bird]") {
  auto model = models::create_model(big_bird_config(), "b.json", "BigBirdForMaskedLM");
  Batch b = big_bird_batch(20, 20);
  b.extra[kBigBirdRandomBlocks] = at::zeros({2, 4, 7, 1}, at::kLong);  // 10 blocks: 8 rows, not 7
  CHECK_THROWS_WITH(model->forward(b), Catch::Contains("BigBird's random blocks must be (4, 8, 1) for 20 positions"));
  b.extra[kBigBirdRandomBlocks] = at::full({2, 4, 8, 1}, 10, at::kLong);
  CHECK_THROWS_WITH(model->forward(b), Catch::Contains("block numbers in [0, 10)"));
  b.extra[kBigBirdRandomBlocks] = at::zeros({2, 4, 8, 1}, at::kFloat);
  CHECK_THROWS_WITH(model->forward(b), Catch::Contains("must be an integer tensor of block numbers, got Float"));
  Json huge = big_bird_config();
  huge["block_size"] = int64_t{1000000000000000000};  // once overflowed int64 into a 4e18-byte allocation
  CHECK_THROWS_WITH(models::create_model(huge, "b.json"), Catch::Contains("b.json: key 'block_size' = 1000000000000000000 is above"));
  huge = big_bird_config();
  huge["num_random_blocks"] = int64_t{1000000000000000000};
  CHECK_THROWS_WITH(models::create_model(huge, "b.json"), Catch::Contains("b.json: key 'num_random_blocks' = 1000000000000000000 is above"));
  Json zero = big_bird_config();
  zero["block_size"] = 0;
  CHECK_THROWS_WITH(models::create_model(zero, "b.json"), Catch::Contains("b.json: key 'block_size'"));
  CHECK_THROWS_WITH(models::create_model(big_bird_config("sparse"), "b.json"), Catch::Contains("key 'attention_type' must be one of"));
  // BigBird's default separator (66) under a smaller vocabulary is none; given, it is checked.
  Json small = big_bird_config();
  small["vocab_size"] = 30;
  CHECK(models::create_model(small, "b.json")->config_json()["sep_token_id"].is_null());
  small["sep_token_id"] = 66;
  CHECK_THROWS_WITH(models::create_model(small, "b.json"), Catch::Contains("key 'sep_token_id' = 66 is outside the vocabulary"));
  auto bert = models::create_model({{"model_type", "bert"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 1},
                                    {"num_attention_heads", 4}, {"intermediate_size", 64}},
                                   "r.json", "BertForMaskedLM");
  CHECK_THROWS_WITH(bert->check_batch(b), Catch::Contains("does not take bigbird_random_blocks"));
}
