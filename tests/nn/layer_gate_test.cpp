// The layer gate (nn/layer_gate.h): a sharded optimizer's all-gather overlapped with the
// forward (train/sharded.h) is right only if every parameter a forward reads is in place before
// its first use — the ones outside the gated layers before the forward starts, a layer's own when
// its stack calls before_layer(). Here the "gather" is a copy from a second model: a forward that
// starts from other weights, each layer's arriving at its gate, must give the second model's loss
// bit for bit, and backward must find no parameter changed after the forward used it.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <map>
#include <set>

#include "lmkit/core/batch.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/layer_gate.h"
#include "test_util.h"

using namespace lmkit;

namespace {

// Copies the source model's values into each layer's parameters as the stack reaches it.
struct CopyingGate : nn::LayerGate {
  std::map<const torch::nn::Module*, std::vector<std::pair<at::Tensor, at::Tensor>>> copies;  // (target, source)
  std::vector<const torch::nn::Module*> order;
  void before_layer(const torch::nn::Module& layer) override {
    order.push_back(&layer);
    at::NoGradGuard no_grad;
    for (auto& [target, source] : copies[&layer]) target.detach().copy_(source);
  }
};

Batch batch_for(bool encoder_decoder, bool images) {
  if (!images) return test::tiny_training_batch(encoder_decoder);
  at::manual_seed(1);
  Batch b;
  b.extra[kPixelValues] = at::randn({2, 1, 28, 28});
  return b;
}

// The loss of `config` with seed 2's weights, computed by a model holding seed 1's until each
// parameter's gate: those outside the layers copied before the forward, the layers' at their gate.
void check_gated(const Json& config, const std::string& architecture, bool encoder_decoder = false, bool images = false,
                 size_t layers = 2) {
  INFO(config.value("model_type", std::string()));
  const Batch batch = batch_for(encoder_decoder, images);
  at::manual_seed(1);
  auto target = models::create_model(config, "tiny.json", architecture);
  at::manual_seed(2);
  auto source = models::create_model(config, "tiny.json", architecture);
  target->eval(), source->eval();
  at::manual_seed(3);  // MAE's random masking: the same in both forwards
  const double expected = source->forward(batch).loss.item<double>();

  const auto gated = nn::gated_layers(*target);
  CHECK(gated.size() == layers);
  const auto targets = target->parameters(), sources = source->parameters();
  REQUIRE(targets.size() == sources.size());
  std::map<const void*, at::Tensor> source_of;
  for (size_t i = 0; i < targets.size(); ++i) source_of[targets[i].unsafeGetTensorImpl()] = sources[i];
  CopyingGate gate;
  std::set<const void*> inside;
  for (const auto* layer : gated) {
    for (const auto& p : layer->parameters()) {
      gate.copies[layer].emplace_back(p, source_of.at(p.unsafeGetTensorImpl()));
      inside.insert(p.unsafeGetTensorImpl());
    }
  }
  {
    at::NoGradGuard no_grad;
    for (auto& p : targets) {
      if (!inside.count(p.unsafeGetTensorImpl())) p.detach().copy_(source_of.at(p.unsafeGetTensorImpl()));
    }
  }
  at::Tensor loss;
  {
    const nn::LayerGateScope scope(&gate);
    at::manual_seed(3);
    loss = target->forward(batch).loss;
  }
  CHECK(gate.order == gated);  // each layer once, in the order they run
  CHECK(loss.item<double>() == expected);
  CHECK_NOTHROW(loss.backward());  // no parameter changed after the forward had used it
}

}  // namespace

TEST_CASE("layer gate: each family's layers get their parameters at their gate and the loss is the arrived weights'",
          "[nn][layer_gate]") {
  check_gated({{"model_type", "gpt2"}, {"vocab_size", 97}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 32}},
              "GPT2LMHeadModel");
  check_gated({{"model_type", "llama"}, {"vocab_size", 97}, {"hidden_size", 32}, {"intermediate_size", 64},
               {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 32}},
              "");
  check_gated({{"model_type", "bloom"}, {"vocab_size", 97}, {"hidden_size", 32}, {"n_layer", 2}, {"n_head", 4}}, "");
  check_gated({{"model_type", "bert"}, {"vocab_size", 97}, {"hidden_size", 32}, {"num_hidden_layers", 2},
               {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 32}},
              "BertForMaskedLM");
  check_gated({{"model_type", "longformer"}, {"vocab_size", 97}, {"hidden_size", 32}, {"num_hidden_layers", 2},
               {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 40}, {"pad_token_id", 1},
               {"attention_window", 4}},
              "");
  check_gated({{"model_type", "big_bird"}, {"vocab_size", 97}, {"hidden_size", 32}, {"num_hidden_layers", 2},
               {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 64},
               {"attention_type", "block_sparse"}, {"block_size", 1}, {"num_random_blocks", 1}},  // sparse past 7 tokens
              "");
  check_gated({{"model_type", "t5"}, {"vocab_size", 97}, {"d_model", 32}, {"d_kv", 8}, {"d_ff", 64}, {"num_layers", 2},
               {"num_decoder_layers", 2}, {"num_heads", 4}, {"decoder_start_token_id", 0}},
              "T5ForConditionalGeneration", true, false, 4);
  check_gated({{"model_type", "vit_mae"}, {"hidden_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
               {"intermediate_size", 64}, {"image_size", 28}, {"patch_size", 4}, {"num_channels", 1},
               {"decoder_hidden_size", 32}, {"decoder_num_hidden_layers", 1}, {"decoder_num_attention_heads", 4},
               {"decoder_intermediate_size", 64}},
              "", false, true, 3);
}

TEST_CASE("layer gate: nothing without a gate; a scope puts back the gate before it", "[nn][layer_gate]") {
  torch::nn::Module layer;
  CopyingGate outer, inner;
  nn::before_layer(layer);  // no gate: nothing to call
  {
    const nn::LayerGateScope a(&outer);
    nn::before_layer(layer);
    {
      const nn::LayerGateScope b(&inner);
      nn::before_layer(layer);
    }
    nn::before_layer(layer);
  }
  nn::before_layer(layer);
  CHECK(outer.order.size() == 2);
  CHECK(inner.order.size() == 1);
}
