#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/models/model.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/attention.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json linformer_bert(const std::string& sharing, int64_t k = 8) {
  return {{"model_type", "bert"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 3},
          {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 32},
          {"attention", "linformer"}, {"linformer_k", k}, {"linformer_sharing", sharing}};
}

int64_t projections_of(models::Model& model) {
  int64_t n = 0;
  for (const auto& p : model.named_parameters()) n += p.key().find("linformer") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("linformer: each sharing owns its projections, and a padded row equals the row alone", "[models][linformer]") {
  for (const auto& [sharing, owned] : std::vector<std::pair<std::string, int64_t>>{
           {"headwise", 6}, {"key-value", 3}, {"layerwise", 1}}) {
    INFO(sharing);
    at::manual_seed(3);
    auto model = models::create_model(linformer_bert(sharing), "m.json", "BertForMaskedLM");
    model->eval();
    CHECK(projections_of(*model) == owned);
    const Json full = {{"model_type", "bert"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 3},
                       {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 32}};
    CHECK(models::count_parameters(*model) - models::count_parameters(*models::create_model(full, "f.json", "BertForMaskedLM")) ==
          owned * 8 * 32);
    Batch padded;
    padded.input_ids = at::randint(1, 64, {2, 24}, at::kLong);
    padded.input_ids.index_put_({1, at::indexing::Slice(17)}, 0);
    padded.attention_mask = padded.input_ids.ne(0).to(at::kLong);
    padded.attention_mask[0].fill_(1);
    const Output both = model->forward(padded);
    Batch alone;
    alone.input_ids = padded.input_ids.slice(0, 1, 2).slice(1, 0, 17);
    const Output one = model->forward(alone);
    // Padded keys are zeroed before E and F: their contents and the longer slice of E change nothing.
    CHECK(at::allclose(one.last_hidden_state[0], both.last_hidden_state[1].slice(0, 0, 17), 1e-5, 1e-6));
    CHECK(model->config_json()["linformer_sharing"] == sharing);
  }
}

TEST_CASE("linformer: the layerwise projection is one tensor, trained by every layer, and survives export", "[models][linformer]") {
  test::TempDir dir;
  auto model = models::create_model(linformer_bert("layerwise"), "m.json", "BertForMaskedLM");
  Batch b;
  b.input_ids = at::randint(1, 64, {2, 16}, at::kLong);
  b.labels = b.input_ids.clone();
  model->forward(b).loss.backward();
  at::Tensor shared;
  for (const auto& p : model->named_parameters()) {
    if (p.key().find("linformer") != std::string::npos) shared = p.value();
  }
  REQUIRE(shared.defined());
  REQUIRE(shared.grad().defined());
  CHECK(shared.grad().abs().sum().item<double>() > 0);
  // Moved or cast, the layers still share the one tensor (to() changes each parameter in place).
  model->to(at::kDouble);
  for (const auto& m : model->modules(false)) {
    if (auto* attn = m->as<nn::MultiHeadAttentionImpl>()) {
      CHECK(attn->kernel().tensor("linformer_e").is_same(shared));
      CHECK(attn->kernel().tensor("linformer_e").scalar_type() == at::kDouble);
    }
  }
  model->to(at::kFloat);
  models::save_pretrained(*model, dir / "ckpt");
  auto loaded = models::load_pretrained(dir / "ckpt");
  model->eval();
  loaded->eval();
  Batch plain;
  plain.input_ids = b.input_ids;
  CHECK(at::equal(model->forward(plain).logits, loaded->forward(plain).logits));
}

TEST_CASE("linformer: a k above the positions or the input, a sharing it lacks, a decoder: named input errors",
          "[models][linformer]") {
  CHECK_THROWS_WITH(models::create_model(linformer_bert("headwise", 40), "m.json"),
                    Catch::Contains("m.json: key 'linformer_k' = 40 is above max_position_embeddings 32"));
  // No upper bound of its own: said as such, not as [1, 1e18] written out.
  CHECK_THROWS_WITH(models::create_model(linformer_bert("headwise", 0), "m.json"),
                    Catch::Contains("m.json: key 'linformer_k' must be >= 1, got 0"));
  // The default k (256) above a small model's positions: said to be the default, not quoted as the file's.
  const Json no_k = {{"model_type", "bert"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 1},
                     {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 128},
                     {"attention", "linformer"}};
  CHECK_THROWS_WITH(models::create_model(no_k, "m.json"),
                    Catch::Contains("m.json: key 'linformer_k' = 256 (its default) is above max_position_embeddings 128"));
  Json odd = linformer_bert("columnwise");
  CHECK_THROWS_WITH(models::create_model(odd, "m.json"), Catch::Contains("key 'linformer_sharing' must be one of"));
  auto model = models::create_model(linformer_bert("headwise"), "m.json", "BertForMaskedLM");
  Batch shorter;
  shorter.input_ids = at::randint(1, 64, {1, 6}, at::kLong);
  // Refused by the forward pass itself, which training, finetuning, evaluation and lmkit-forward all take
  // (check_batch, lmkit-forward's alone, once held this check: training on short inputs went through).
  CHECK_NOTHROW(model->check_batch(shorter));
  model->train();
  CHECK_THROWS_WITH(model->forward(shorter), Catch::Contains("input of 6 positions, fewer than linformer_k 8"));
  model->eval();
  at::NoGradGuard no_grad;
  CHECK_THROWS_WITH(model->forward(shorter), Catch::Contains("input of 6 positions, fewer than linformer_k 8"));
  const Json gpt = {{"model_type", "gpt2"}, {"vocab_size", 64}, {"n_embd", 32}, {"n_layer", 1}, {"n_head", 4},
                    {"n_positions", 32}, {"attention", "linformer"}};
  CHECK_THROWS_WITH(models::create_model(gpt, "g.json"), Catch::Contains("g.json: key 'attention' = \"linformer\" cannot be a decoder's causal self-attention"));
}
