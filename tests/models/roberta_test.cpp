// RoBERTa: the roberta-base parameter count, positions counted past the padding,
// the classification head on <s>, and the tokenizer family's specials and template.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "../data/data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/roberta.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json tiny(const std::string& head = "") {
  Json c = {{"model_type", "roberta"}, {"vocab_size", 60}, {"hidden_size", 16}, {"num_hidden_layers", 2},
            {"num_attention_heads", 2}, {"intermediate_size", 32}, {"max_position_embeddings", 12}};
  if (!head.empty()) c["architectures"] = Json::array({head});
  return c;
}

}  // namespace

TEST_CASE("roberta: roberta-base has RobertaForMaskedLM's 124,697,433 parameters", "[models][roberta]") {
  const Json preset = load_json_file(test::source_dir() + "/models/roberta-base.json");
  CHECK(models::count_parameters(*models::create_model(preset, "roberta-base.json")) == 124697433);
  CHECK(models::create_model(preset, "roberta-base.json")->architecture() == "RobertaForMaskedLM");
}

TEST_CASE("roberta: positions start after padding_idx and skip <pad>, and the limit is 2 less", "[models][roberta]") {
  auto model = std::dynamic_pointer_cast<models::RobertaImpl>(models::create_model(tiny(), "tiny"));
  REQUIRE(model);
  const at::Tensor ids = at::tensor({0, 7, 8, 2, 1, 1}, at::kLong).view({1, 6});
  CHECK(at::equal(model->position_ids(ids), at::tensor({2, 3, 4, 5, 1, 1}, at::kLong).view({1, 6})));
  CHECK(model->max_length() == 10);
  Batch b;
  b.input_ids = at::full({1, 11}, 5, at::kLong);
  CHECK_THROWS_WITH(model->check_batch(b), Catch::Contains("takes at most 10"));
  b.input_ids = at::full({1, 10}, 5, at::kLong);
  CHECK_NOTHROW(model->check_batch(b));
  // Padding rows of both embeddings start at zero and get no gradient, as HF's padding_idx.
  CHECK(model->position_embeddings->weight[1].abs().sum().item<double>() == 0);
  CHECK(model->word_embeddings->weight[1].abs().sum().item<double>() == 0);
}

TEST_CASE("roberta: the masked LM reports an mlm term and padding changes no real token's output", "[models][roberta]") {
  auto model = models::create_model(tiny(), "tiny");
  model->eval();
  Batch b;
  b.input_ids = at::tensor({0, 7, 8, 9, 2, 1, 1, 0, 7, 8, 9, 2, 10, 2}, at::kLong).view({2, 7});
  b.attention_mask = b.input_ids.ne(1).to(at::kLong);
  b.labels = at::full({2, 7}, -100, at::kLong);
  b.labels.index_put_({0, 2}, 8);
  b.labels.index_put_({1, 3}, 9);
  const Output out = model->forward(b);
  REQUIRE(out.terms.size() == 1);
  CHECK(out.terms[0].name == "mlm");
  CHECK(out.terms[0].targets.item<int64_t>() == 2);
  CHECK(model->loss_targets(b) == std::vector<std::pair<std::string, int64_t>>{{"mlm", 2}});
  // Row 0 alone, unpadded, gives the same hidden states at its real positions.
  Batch alone;
  alone.input_ids = b.input_ids.slice(0, 0, 1).slice(1, 0, 5);
  const Output one = model->forward(alone);
  CHECK(at::allclose(one.last_hidden_state[0], out.last_hidden_state[0].slice(0, 0, 5), 1e-5, 1e-6));
}

TEST_CASE("roberta: the classifier reads <s> through dense + tanh + out_proj", "[models][roberta]") {
  auto model = std::dynamic_pointer_cast<models::RobertaImpl>(
      models::create_model(tiny("RobertaForSequenceClassification"), "tiny"));
  REQUIRE(model);
  model->eval();
  Batch b;
  b.input_ids = at::tensor({0, 7, 8, 2}, at::kLong).view({1, 4});
  const Output out = model->forward(b);
  const at::Tensor first = out.last_hidden_state.select(1, 0);
  const at::Tensor want = model->classifier_out(at::tanh(model->classifier_dense(first)));
  CHECK(at::allclose(out.logits, want));
  CHECK_FALSE(out.pooler_output.defined());
}

TEST_CASE("roberta: the tokenizer family places <s> <pad> </s> <unk> <mask> and RoBERTa's template", "[tokenizer][roberta]") {
  const auto& tok = *test::data_fixture("roberta").tok;
  const auto& s = tok.specials();
  CHECK(tok.family() == "roberta");
  CHECK(s.cls == 0);
  CHECK(s.pad == 1);
  CHECK(s.sep == 2);
  CHECK(s.eos == 2);
  CHECK(s.unk == 3);
  CHECK(tok.piece(s.mask) == "<mask>");
  const auto a = tok.encode("Hello there"), b = tok.encode("again");
  std::vector<int32_t> pair = {0};
  pair.insert(pair.end(), a.begin(), a.end());
  pair.insert(pair.end(), {2, 2});
  pair.insert(pair.end(), b.begin(), b.end());
  pair.push_back(2);
  const auto enc = tok.encode_pair("Hello there", std::string_view("again"));
  CHECK(enc.ids == pair);
  CHECK(enc.type_ids == std::vector<int32_t>(pair.size(), 0));
}
