#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "lmkit/core/batch.h"
#include "lmkit/core/error.h"
#include "lmkit/models/model.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/attention_kernel.h"

using namespace lmkit;

namespace {

Json relative_gpt(int64_t reach) {
  return {{"model_type", "gpt2"}, {"vocab_size", 48}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 32},
          {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"attention", "relative"},
          {"max_relative_position", reach}};
}

// A registered kernel that attends uniformly over the keys its mask lets through: user code's route.
class UniformAttention : public nn::AttentionKernel {
 public:
  UniformAttention(torch::nn::Module& host, const nn::AttentionSettings& s) : AttentionKernel(host, s) {}
  at::Tensor attend(const nn::AttentionInputs& in) override {
    const at::Tensor zero_q = at::zeros_like(in.q);  // equal scores: the mean of the values the bias allows
    return nn::scaled_dot_product(zero_q, in.k, in.v, in.mask.bias, 1.0, 0.0, false);
  }
};

}  // namespace

TEST_CASE("attention registry: relative attention decodes with the KV cache as the full forward does, clipped or not",
          "[attention][nn]") {
  for (int64_t reach : {2, 40}) {
    INFO("max_relative_position " << reach);
    at::manual_seed(5);
    auto model = models::create_model(relative_gpt(reach), "g.json", "GPT2LMHeadModel");
    model->eval();
    Batch b;
    b.input_ids = at::randint(1, 48, {2, 9}, at::kLong);
    const at::Tensor full = model->forward(b).logits;  // (B, T, V)
    auto session = model->start_decoding(b.input_ids, at::Tensor(), true);
    CHECK(at::allclose(session->step_all(b.input_ids.slice(1, 0, 4)), full.slice(1, 0, 4), 1e-5, 1e-5));  // the prompt
    at::Tensor steps = session->step_all(b.input_ids.slice(1, 4, 6));  // (B, 2, V): positions 4 and 5
    CHECK(at::allclose(steps, full.slice(1, 4, 6), 1e-5, 1e-5));
    const at::Tensor next = session->step(b.input_ids.slice(1, 6, 7));
    CHECK(at::allclose(next, full.select(1, 6), 1e-5, 1e-5));
  }
}

TEST_CASE("attention registry: an attention's keys belong to it, and a family takes only what it can run",
          "[attention][config]") {
  Json bert = {{"model_type", "bert"}, {"vocab_size", 64}, {"hidden_size", 32}, {"num_hidden_layers", 1},
               {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 32}};
  Json stray = bert;
  stray["max_relative_position"] = 4;  // without "attention": "relative"
  CHECK_THROWS_WITH(models::create_model(stray, "b.json"),
                    Catch::Contains("b.json: key 'max_relative_position' is attention 'relative''s") &&
                        Catch::Contains("this config's attention is 'full'"));
  stray["attention"] = "linformer";
  CHECK_THROWS_WITH(models::create_model(stray, "b.json"), Catch::Contains("attention 'relative''s"));
  // Longformer's window and BigBird's blocks are theirs: refused by name elsewhere, never read and dropped.
  for (const auto& [key, value, owner] : std::vector<std::tuple<std::string, Json, std::string>>{
           {"attention_window", 8, "Longformer"}, {"block_size", 16, "BigBird"}, {"num_random_blocks", 2, "BigBird"},
           {"attention_type", "original_full", "BigBird"}}) {
    Json other = bert;
    other[key] = value;
    CHECK_THROWS_WITH(models::create_model(other, "b.json"),
                      Catch::Contains("b.json: key '" + key + "' is " + owner + "'s, and this config is bert's"));
  }
  // --fields (config_fields) lists what the model reads: no other attention's or model type's keys.
  auto keys_of = [](const Json& config) {
    std::vector<std::string> keys;
    for (const auto& row : models::create_model(config, "c.json")->config_fields()) keys.push_back(row.at("key"));
    return keys;
  };
  auto has = [](const std::vector<std::string>& keys, const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  const auto plain = keys_of(bert);
  CHECK(has(plain, "attention"));
  for (const char* k : {"max_relative_position", "linformer_k", "attention_window", "block_size", "span_boundary_max_targets"}) {
    CHECK_FALSE(has(plain, k));
  }
  Json with_relative = bert;
  with_relative["attention"] = "relative";
  CHECK(has(keys_of(with_relative), "max_relative_position"));
  Json longformer = bert;
  longformer["model_type"] = "longformer";
  longformer["pad_token_id"] = 1;
  longformer["attention_window"] = 4;
  const auto lf = keys_of(longformer);
  CHECK(has(lf, "attention_window"));
  CHECK_FALSE(has(lf, "attention"));
  CHECK_FALSE(has(lf, "block_size"));
  Json unknown = bert;
  unknown["attention"] = "performer";
  CHECK_THROWS_WITH(models::create_model(unknown, "b.json"),
                    Catch::Contains("'attention' = \"performer\" is not an attention this family takes (full, linformer or relative)"));
  unknown["attention"] = "longformer";  // Longformer's own, chosen by model_type
  CHECK_THROWS_WITH(models::create_model(unknown, "b.json"), Catch::Contains("is not an attention this family takes"));
  Json gpt = relative_gpt(4);
  gpt.erase("max_relative_position");
  gpt["attention"] = "linformer";  // not causal
  CHECK_THROWS_WITH(models::create_model(gpt, "g.json"), Catch::Contains("cannot be a decoder's causal self-attention"));
  Json bad = relative_gpt(0);
  CHECK_THROWS_WITH(models::create_model(bad, "g.json"), Catch::Contains("max_relative_position"));
  // Written back with its own key, read again to the same model.
  auto model = models::create_model(relative_gpt(4), "g.json");
  const Json written = model->config_json();
  CHECK(written.at("attention") == "relative");
  CHECK(written.at("max_relative_position") == 4);
  CHECK_FALSE(models::create_model(bert, "b.json")->config_json().contains("max_relative_position"));
  // GPT-2 without its position table: relative attention alone, as in Shaw et al.'s paper.
  Json alone = relative_gpt(4);
  alone["position_embedding_type"] = "none";
  auto nope = models::create_model(alone, "g.json");
  for (const auto& p : nope->named_parameters()) CHECK(p.key().find("wpe") == std::string::npos);
  CHECK(models::count_parameters(*model) - models::count_parameters(*nope) == 32 * 32);  // n_positions x n_embd
  CHECK(nope->config_json().at("position_embedding_type") == "none");
  CHECK_FALSE(model->config_json().contains("position_embedding_type"));
  alone["position_embedding_type"] = "rotary";
  CHECK_THROWS_WITH(models::create_model(alone, "g.json"), Catch::Contains("position_embedding_type"));
}

TEST_CASE("attention registry: user code registers an attention, a config names it, a name taken twice is refused",
          "[attention][nn]") {
  nn::AttentionSpec spec;
  spec.name = "uniform-test";
  spec.summary = "every allowed key weighted alike";
  spec.create = [](torch::nn::Module& host, const nn::AttentionSettings& s) { return std::make_unique<UniformAttention>(host, s); };
  if (nn::attention_names().find("uniform-test") == std::string::npos) nn::register_attention(spec);
  CHECK_THROWS_WITH(nn::register_attention(spec), Catch::Contains("attention 'uniform-test' is registered twice"));
  nn::MultiHeadAttention m(nn::MultiHeadAttentionOptions(16, 2).attention("uniform-test"));
  m->eval();
  const at::Tensor x = at::randn({1, 5, 16});
  const at::Tensor mask = nn::attention_bias(at::tensor({1, 1, 1, 0, 0}).view({1, 5}), false, 5, 5, at::kFloat, at::kCPU);
  const at::Tensor y = m(x, mask);
  // Each output row: the output projection of the mean of the first three value rows.
  const at::Tensor v = m->qkv(x).slice(2, 32, 48).slice(1, 0, 3).mean(1, true);  // (1, 1, 16)
  CHECK(at::allclose(y, m->out(v).expand_as(y), 1e-5, 1e-6));
  CHECK_THROWS_WITH(nn::MultiHeadAttention(nn::MultiHeadAttentionOptions(16, 2).attention("nope")),
                    Catch::Contains("unknown attention 'nope'"));
}

TEST_CASE("attention registry: the Transformer's relative self-attention decodes with the cache as without it",
          "[attention][nn]") {
  const Json config = {{"model_type", "transformer"}, {"vocab_size", 40}, {"d_model", 32}, {"encoder_layers", 1},
                       {"decoder_layers", 2}, {"num_heads", 4}, {"d_ff", 64}, {"dropout", 0.0},
                       {"attention", "relative"}, {"max_relative_position", 3}};
  at::manual_seed(2);
  auto model = models::create_model(config, "t.json");
  model->eval();
  CHECK(model->config_json().at("max_relative_position") == 3);
  const at::Tensor source = at::randint(3, 40, {2, 7}, at::kLong), target = at::randint(3, 40, {2, 6}, at::kLong);
  auto cached = model->start_decoding(source, at::ones_like(source), true);
  auto whole = model->start_decoding(source, at::ones_like(source), false);
  for (int64_t i = 0; i < target.size(1); ++i) {
    INFO("step " << i);
    const at::Tensor token = target.slice(1, i, i + 1);
    CHECK(at::allclose(cached->step(token), whole->step(token), 1e-5, 1e-5));
  }
}
