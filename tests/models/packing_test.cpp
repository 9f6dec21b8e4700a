// Document masking: a packed row (Batch::extra's document_ids and position_ids) gives each
// document the logits and loss it has alone, for every decoder family and BERT / RoBERTa;
// the models that cannot keep documents apart refuse the inputs by name.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/batch.h"
#include "lmkit/core/error.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/attention.h"

using namespace lmkit;

namespace {

const std::vector<int64_t> kPackedLengths = {5, 3, 6};  // three documents in one row of 14

Json packing_config(const std::string& type) {
  if (type == "gpt2") {
    return {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 2}, {"n_head", 2}, {"n_positions", 32},
            {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
  }
  if (type == "llama" || type == "mistral") {
    Json c = {{"model_type", type}, {"vocab_size", 50}, {"hidden_size", 16}, {"intermediate_size", 32},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
              {"max_position_embeddings", 64}};
    if (type == "mistral") c["sliding_window"] = 4;  // shorter than two of the documents: the window inside each
    return c;
  }
  if (type == "bloom") return {{"model_type", "bloom"}, {"vocab_size", 50}, {"hidden_size", 16}, {"n_layer", 2}, {"n_head", 2}};
  return {{"model_type", type}, {"vocab_size", 50}, {"hidden_size", 16}, {"num_hidden_layers", 2},
          {"num_attention_heads", 2}, {"intermediate_size", 32}, {"max_position_embeddings", 40},
          {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}};
}

// A row of documents of kPackedLengths: ids, each token's document, its position in it from `first`.
Batch packed_row(const at::Tensor& ids, int64_t first) {
  std::vector<int64_t> docs, positions;
  for (size_t d = 0; d < kPackedLengths.size(); ++d) {
    for (int64_t i = 0; i < kPackedLengths[d]; ++i) docs.push_back(static_cast<int64_t>(d)), positions.push_back(first + i);
  }
  Batch b;
  b.input_ids = ids;
  b.extra[kDocumentIds] = at::tensor(docs, at::kLong).view({1, -1});
  if (first >= 0) b.extra[kPositionIds] = at::tensor(positions, at::kLong).view({1, -1});
  return b;
}

}  // namespace

TEST_CASE("document mask: a packed row's logits and loss equal each document's alone, in every family that takes it",
          "[models][packing]") {
  for (const std::string type : {"gpt2", "llama", "mistral", "bloom", "bert", "roberta"}) {
    INFO(type);
    at::manual_seed(3);
    auto model = models::create_model(packing_config(type), type + ".json");
    model->eval();
    model->full_logits = true;
    REQUIRE(model->takes_documents());
    const bool causal = model->shifted_labels();
    const at::Tensor ids = at::randint(5, 50, {1, 14}, at::kLong);  // no padding id (RoBERTa's 1) among them
    Batch packed = packed_row(ids, model->first_position());
    // Causal: the first token of each document is no target (it would be predicted from the one before).
    at::Tensor labels = ids.clone();
    if (causal) labels.index_put_({0, 5}, -100), labels.index_put_({0, 8}, -100);
    else labels = at::where(at::arange(14).remainder(3).eq(0).view({1, 14}), ids, at::full_like(ids, -100));
    packed.labels = labels;
    model->check_batch(packed);
    const Output whole = model->forward(packed);
    double loss_sum = 0, targets = 0;
    for (size_t d = 0, start = 0; d < kPackedLengths.size(); start += kPackedLengths[d], ++d) {
      Batch alone;
      alone.input_ids = ids.narrow(1, static_cast<int64_t>(start), kPackedLengths[d]);
      alone.labels = labels.narrow(1, static_cast<int64_t>(start), kPackedLengths[d]);
      const Output out = model->forward(alone);
      const at::Tensor part = whole.logits.narrow(1, static_cast<int64_t>(start), kPackedLengths[d]);
      CHECK((part - out.logits).abs().max().item<double>() < 1e-5);
      const int64_t n = alone.labels.narrow(1, causal ? 1 : 0, kPackedLengths[d] - (causal ? 1 : 0)).ne(-100).sum().item<int64_t>();
      loss_sum += out.loss.item<double>() * static_cast<double>(n), targets += static_cast<double>(n);
    }
    CHECK(std::abs(whole.loss.item<double>() - loss_sum / targets) < 1e-5);
    // Without the mask the documents see each other: the same row gives other logits.
    Batch open = packed;
    open.extra.erase(kDocumentIds);
    const at::Tensor mixed = model->forward(open).logits;
    CHECK((mixed.narrow(1, 8, 6) - whole.logits.narrow(1, 8, 6)).abs().max().item<double>() > 1e-4);
  }
}

TEST_CASE("document mask: the segments the varlen flash kernel takes are the block-diagonal bias's", "[models][packing]") {
  // Row 0: documents of 3, 2 and 3 tokens; row 1: 2 tokens, then 6 of a second document whose
  // last 2 are padding (a segment of their own).
  const at::Tensor docs = at::tensor(std::vector<int64_t>{0, 0, 0, 1, 1, 2, 2, 2, 0, 0, 1, 1, 1, 1, 1, 1}).view({2, 8});
  at::Tensor real = at::ones({2, 8}, at::kLong);
  real[1].slice(0, 6).fill_(0);
  const auto [offsets, longest] = nn::document_segments(docs, real, at::kCPU);
  CHECK(offsets.scalar_type() == at::kInt);
  CHECK(at::equal(offsets, at::tensor(std::vector<int32_t>{0, 3, 5, 8, 10, 14, 16})));
  CHECK(longest.item<int64_t>() == 4);
  // On any rows, the bias lets a real query see exactly the keys of its own segment (up to itself
  // with causal): the varlen kernel's mask.
  at::manual_seed(3);
  for (bool causal : {false, true}) {
    const at::Tensor ids = at::randint(0, 3, {3, 20}, at::kLong).cumsum(1);  // runs of equal ids
    at::Tensor mask = at::ones({3, 20}, at::kLong);
    mask[2].slice(0, 15).fill_(0);
    const auto [starts, most] = nn::document_segments(ids, mask, at::kCPU);
    at::Tensor segment = at::zeros({60}, at::kLong);
    segment.index_put_({starts.slice(0, 1, -1).to(at::kLong)}, 1);
    segment = segment.cumsum(0).view({3, 20});  // each position's segment
    at::Tensor allowed = segment.unsqueeze(2).eq(segment.unsqueeze(1));  // (B, Tq, Tk)
    if (causal) allowed = allowed.logical_and(at::ones({20, 20}, at::kBool).tril());
    const at::Tensor bias = nn::document_attention_bias(ids, mask, causal, at::kFloat, at::kCPU).squeeze(1);
    const at::Tensor queries = mask.ne(0).unsqueeze(2).expand({3, 20, 20});
    CHECK(at::equal(bias.eq(0).logical_and(queries), allowed.logical_and(queries)));
    CHECK(most.item<int64_t>() <= 20);
  }
  // On the CPU the mask is the bias alone.
  const nn::AttentionMask on_cpu = nn::document_mask(docs, real, true, at::kFloat, at::kCPU);
  CHECK_FALSE(on_cpu.segment_offsets.defined());
  CHECK(at::equal(on_cpu.bias, nn::document_attention_bias(docs, real, true, at::kFloat, at::kCPU)));
}

TEST_CASE("document mask: models that mix positions refuse document_ids, and position_ids are checked", "[models][packing]") {
  Json t5 = {{"model_type", "t5"}, {"vocab_size", 50}, {"d_model", 16}, {"d_kv", 8}, {"d_ff", 32}, {"num_layers", 1},
             {"num_heads", 2}};
  Json longformer = packing_config("longformer");
  longformer["attention_window"] = 4;
  for (const auto& [config, name] : {std::pair{t5, "T5ForConditionalGeneration"}, std::pair{longformer, "Longformer"}}) {
    auto model = models::create_model(config, "config.json");
    CHECK_FALSE(model->takes_documents());
    CHECK(model->first_position() == -1);
    Batch b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), -1);
    b.labels = b.input_ids;
    CHECK_THROWS_WITH(model->check_batch(b), Catch::Contains(name) && Catch::Contains("does not take document_ids"));
  }
  auto bloom = models::create_model(packing_config("bloom"), "bloom.json");
  Batch b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), 0);
  CHECK_THROWS_WITH(bloom->check_batch(b), Catch::Contains("does not take position_ids"));
  auto gpt = models::create_model(packing_config("gpt2"), "gpt2.json");
  b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), 30);  // positions 30 .. 35 of a 32-position model
  CHECK_THROWS_WITH(gpt->check_batch(b), Catch::Contains("position_ids") && Catch::Contains("outside [0, 32)"));
  b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), 0);
  b.extra[kPositionIds][0][2] = -2;  // below zero: the lowest is named
  CHECK_THROWS_WITH(gpt->check_batch(b), Catch::Contains("position_ids (the model's positions) holds id -2 outside [0, 32)"));
  b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), 0);
  b.input_ids[0][3] = 50;  // the vocabulary's first id past its end, in int32 as in int64
  CHECK_THROWS_WITH(gpt->check_batch(b), Catch::Contains("holds id 50 outside [0, 50)"));
  b.input_ids = b.input_ids.to(at::kInt);
  CHECK_THROWS_WITH(gpt->check_batch(b), Catch::Contains("holds id 50 outside [0, 50)"));
  b.input_ids[0][3] = 49;
  CHECK_NOTHROW(gpt->check_batch(b));
  b = packed_row(at::randint(5, 50, {1, 14}, at::kLong), 30);
  b.extra[kPositionIds] = at::zeros({1, 13}, at::kLong);
  CHECK_THROWS_WITH(gpt->check_batch(b), Catch::Contains("position_ids"));
}
