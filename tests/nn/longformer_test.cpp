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

Json longformer_config(Json window = 4, const std::string& model_type = "longformer") {
  Json c = {{"model_type", model_type}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 66},
            {"type_vocab_size", 1}, {"pad_token_id", 1}, {"layer_norm_eps", 1e-5}};
  if (model_type == "longformer") c["attention_window"] = window;
  return c;
}

// Two rows of t, the second right-padded after `real`; ids above the pad (1).
Batch longformer_batch(int64_t t, int64_t real) { return test::right_padded_batch(64, t, real, 1); }

}  // namespace

TEST_CASE("longformer: banded attention with global keys equals full attention under the same mask", "[nn][longformer]") {
  at::manual_seed(5);
  for (int64_t w : {1, 2, 3, 5}) {
    for (int64_t t : {3, 7, 12, 20}) {
      const at::Tensor q = at::randn({2, 3, t, 8}, at::kDouble), k = at::randn({2, 3, t, 8}, at::kDouble);
      const at::Tensor v = at::randn({2, 3, t, 8}, at::kDouble);
      at::Tensor real = at::ones({2, t}, at::kBool);
      real[1].slice(0, t - t / 3).fill_(false);
      // Globals: positions 0 and t/2 of row 0, position 1 of row 1 (its second slot holds none).
      const at::Tensor slots = at::tensor(std::vector<int64_t>{0, t / 2, 1, 0}, at::kLong).view({2, 2});
      const at::Tensor ok = at::tensor(std::vector<int64_t>{1, t / 2 != 0, 1, 0}, at::kLong).view({2, 2}).ne(0);
      at::Tensor global = at::zeros({2, t}, at::kBool).scatter(1, slots, ok);
      const at::Tensor local = real.logical_and(global.logical_not());
      const at::Tensor at_slots = slots.view({2, 1, 2, 1}).expand({2, 3, 2, 8});
      const at::Tensor got = nn::banded_attention(q, k, v, local, w, w, 0.3, 0.0, false, k.gather(2, at_slots),
                                                  v.gather(2, at_slots), ok);
      // The dense mask: a local key within w either side, or a global key.
      const at::Tensor pos = at::arange(t, at::kLong);
      const at::Tensor near = (pos.view({t, 1}) - pos.view({1, t})).abs().le(w);  // (T, T)
      const at::Tensor allowed = near.view({1, 1, t, t}).logical_and(local.view({2, 1, 1, t})).logical_or(global.view({2, 1, 1, t}));
      const at::Tensor bias = at::where(allowed, at::zeros({}, at::kDouble), at::full({}, nn::mask_value(at::kDouble), at::kDouble));
      const at::Tensor want = nn::scaled_dot_product(q, k, v, bias, 0.3, 0.0, false);
      CAPTURE(w, t);
      CHECK(test::max_abs_diff(got, want) < 1e-12);
    }
  }
}

TEST_CASE("longformer: a window over the whole input with no global token is RoBERTa with the same weights",
          "[models][longformer]") {
  at::manual_seed(7);
  auto longformer = models::create_model(longformer_config(64), "l.json", "LongformerForMaskedLM");
  auto roberta = models::create_model(longformer_config(0, "roberta"), "r.json", "RobertaForMaskedLM");
  auto params = longformer->named_parameters();
  {
    at::NoGradGuard no_grad;
    for (auto& p : roberta->named_parameters()) p.value().copy_(params[p.key()]);  // Longformer adds only *_global
  }
  CHECK(params.size() == roberta->named_parameters().size() + 4 * 2);
  longformer->eval(), roberta->eval();
  const Batch b = longformer_batch(20, 13);
  // Real positions (Longformer's padding rows attend to nothing, RoBERTa's to the real keys).
  const at::Tensor real = b.attention_mask.unsqueeze(-1).to(at::kFloat);
  CHECK(test::max_abs_diff(longformer->forward(b).logits * real, roberta->forward(b).logits * real) < 1e-5);
}

TEST_CASE("longformer: a padded row equals the row alone, with global tokens, and recomputation changes no gradient",
          "[models][longformer]") {
  at::manual_seed(9);
  auto model = models::create_model(longformer_config(Json::array({4, 6})), "l.json", "LongformerForMaskedLM");
  model->eval();
  Batch padded = longformer_batch(23, 15);
  at::Tensor global = at::zeros({2, 23}, at::kLong);
  global.index_put_({0, 3}, 1), global.index_put_({1, 0}, 1), global.index_put_({1, 9}, 1);
  padded.extra[kGlobalAttentionMask] = global;
  const Output both = model->forward(padded);
  Batch alone;
  alone.input_ids = padded.input_ids.slice(0, 1, 2).slice(1, 0, 15);
  alone.extra[kGlobalAttentionMask] = global.slice(0, 1, 2).slice(1, 0, 15);
  CHECK(test::max_abs_diff(model->forward(alone).logits[0], both.logits[1].slice(0, 0, 15)) < 1e-5);
  // A global token changes what a far position sees; without it the far position's output is local.
  Batch local = padded;
  local.extra.erase(kGlobalAttentionMask);
  CHECK(test::max_abs_diff(model->forward(local).logits[0][20], both.logits[0][20]) > 1e-4);

  model->train();
  padded.labels = padded.input_ids.masked_fill(padded.attention_mask.eq(0), -100);
  auto gradients = [&](bool recompute) {
    nn::RecomputeScope scope(recompute);
    model->zero_grad();
    at::manual_seed(1);  // the same dropout masks
    model->forward(padded).loss.backward();
    std::vector<at::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto stored = gradients(false), recomputed = gradients(true);
  for (size_t i = 0; i < stored.size(); ++i) CHECK(at::equal(stored[i], recomputed[i]));
}

TEST_CASE("longformer: an odd window, a window list of another length, a bad global mask: named input errors",
          "[models][longformer]") {
  CHECK_THROWS_WITH(models::create_model(longformer_config(5), "l.json"),
                    Catch::Contains("l.json: key 'attention_window' = 5 is not an even number >= 2"));
  CHECK_THROWS_WITH(models::create_model(longformer_config(Json::array({4, 4, 4})), "l.json"),
                    Catch::Contains("key 'attention_window' has 3 values for 2 layers"));
  CHECK_THROWS_WITH(models::create_model(longformer_config("wide"), "l.json"),
                    Catch::Contains("key 'attention_window' = \"wide\" is not an integer or a list of integers"));
  Json linformer = longformer_config(4);
  linformer["attention"] = "linformer";
  CHECK_THROWS_WITH(models::create_model(linformer, "l.json"), Catch::Contains("Longformer's attention is its own"));
  auto model = models::create_model(longformer_config(4), "l.json", "LongformerForMaskedLM");
  Batch b = longformer_batch(10, 6);
  b.extra[kGlobalAttentionMask] = at::full({2, 10}, 2, at::kLong);
  CHECK_THROWS_WITH(model->check_batch(b), Catch::Contains("global_attention_mask"));
  b.extra[kGlobalAttentionMask] = at::zeros({2, 9}, at::kLong);
  CHECK_THROWS_WITH(model->check_batch(b), Catch::Contains("global_attention_mask"));
  auto roberta = models::create_model(longformer_config(0, "roberta"), "r.json", "RobertaForMaskedLM");
  b.extra[kGlobalAttentionMask] = at::zeros({2, 10}, at::kLong);
  CHECK_THROWS_WITH(roberta->check_batch(b), Catch::Contains("does not take global_attention_mask"));
  // Written back as HF reads it: one number stays one number, a list a list.
  CHECK(model->config_json()["attention_window"] == 4);
  CHECK(models::create_model(longformer_config(Json::array({4, 8})), "l.json")->config_json()["attention_window"] ==
        Json::array({4, 8}));
}
