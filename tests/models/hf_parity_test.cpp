// lmkit against HuggingFace Transformers: each fixture's checkpoint loads, and
// its forward outputs, hidden states, losses and every parameter gradient
// match HF's within the fixture README's tolerances.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>

#include "lmkit/io/safetensors.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/t5.h"
#include "lmkit/nn/position.h"
#include "test_util.h"

using namespace lmkit;

namespace {

// max |a - b| / (atol + rtol |b|): <= 1 means within tolerance.
double tolerance_ratio(const at::Tensor& got, const at::Tensor& want, double atol, double rtol) {
  at::Tensor g = got.detach().to(at::kDouble), w = want.to(at::kDouble);
  REQUIRE(g.sizes() == w.sizes());
  return ((g - w).abs() / (atol + rtol * w.abs())).max().item<double>();
}

void check_close(const std::string& what, const at::Tensor& got, const at::Tensor& want, double atol = 1e-4,
                 double rtol = 1e-4) {
  const double diff = test::max_abs_diff(got.detach(), want);
  INFO(what << ": max abs diff " << diff);
  // LMKIT_PARITY_REPORT=1: print every comparison (the figures quoted in docs/models.md).
  if (std::getenv("LMKIT_PARITY_REPORT")) std::printf("parity %-60s max abs diff %.2e\n", what.c_str(), diff);
  CHECK(tolerance_ratio(got, want, atol, rtol) <= 1.0);
}

Batch batch_from(const io::TensorFile& in, const std::string& labels_name = "labels") {
  Batch b;
  b.input_ids = in.get("input_ids");
  b.attention_mask = in.get("attention_mask");
  b.token_type_ids = in.get("token_type_ids");
  b.labels = in.get(labels_name);
  if (in.get("next_sentence_label").defined()) b.extra["next_sentence_label"] = in.get("next_sentence_label");
  b.decoder_input_ids = in.get("decoder_input_ids");
  return b;
}

void check_gradients(models::Model& model, const std::string& dir) {
  const io::TensorFile grads = io::read_safetensors(dir + "/grads.safetensors");
  size_t checked = 0;
  for (const auto& [name, got] : models::hf_gradients(model)) {
    at::Tensor want = grads.get("grad." + name);
    INFO("gradient of " << name);
    REQUIRE(want.defined());
    REQUIRE(got.defined());
    check_close("grad." + name, got, want, 1e-5, 1e-3);
    ++checked;
  }
  CHECK(checked == grads.tensors.size());  // every HF parameter is covered
}

std::shared_ptr<models::Model> load(const std::string& name) {
  models::LoadReport report;
  auto model = models::load_pretrained(test::hf_fixture(name), "", &report);
  CHECK(report.missing.empty());
  CHECK(report.unexpected.empty());
  model->eval();
  model->full_logits = true;
  model->output_hidden_states = true;
  return model;
}

}  // namespace

TEST_CASE("parity: BertForPreTraining matches HF outputs with losses and gradients", "[models][parity]") {
  auto model = load("bert");
  const auto in = io::read_safetensors(test::hf_fixture("bert/inputs.safetensors"));
  const auto want = io::read_safetensors(test::hf_fixture("bert/expected.safetensors"));
  Output out = model->forward(batch_from(in, "mlm_labels"));
  check_close("prediction_logits", out.logits, want.at("prediction_logits", "bert"));
  check_close("seq_relationship_logits", out.get("seq_relationship_logits"), want.at("seq_relationship_logits", "bert"));
  check_close("pooled_output", out.pooler_output, want.at("pooled_output", "bert"));
  check_close("last_hidden_state", out.last_hidden_state, want.at("last_hidden_state", "bert"));
  REQUIRE(out.hidden_states.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    check_close("hidden_states." + std::to_string(i), out.hidden_states[i],
                want.at("hidden_states." + std::to_string(i), "bert"));
  }
  REQUIRE(out.terms.size() == 2);
  check_close("mlm_loss", out.term("mlm")->mean, want.at("mlm_loss", "bert"), 0, 1e-5);
  check_close("nsp_loss", out.term("nsp")->mean, want.at("nsp_loss", "bert"), 0, 1e-5);
  check_close("loss", out.loss, want.at("loss", "bert"), 0, 1e-5);
  out.loss.backward();
  check_gradients(*model, test::hf_fixture("bert"));
}

TEST_CASE("parity: the MLM loss projected only at labelled positions equals the full one", "[models][parity]") {
  auto model = load("bert");
  const auto in = io::read_safetensors(test::hf_fixture("bert/inputs.safetensors"));
  model->full_logits = false;
  Output sparse = model->forward(batch_from(in, "mlm_labels"));
  CHECK_FALSE(sparse.logits.defined());
  check_close("mlm_loss (sparse)", sparse.term("mlm")->mean,
              io::read_safetensors(test::hf_fixture("bert/expected.safetensors")).at("mlm_loss", "bert"), 0, 1e-5);
}

TEST_CASE("parity: BertForSequenceClassification matches HF", "[models][parity]") {
  auto model = load("bert_seqcls");
  const auto in = io::read_safetensors(test::hf_fixture("bert_seqcls/inputs.safetensors"));
  const auto want = io::read_safetensors(test::hf_fixture("bert_seqcls/expected.safetensors"));
  Output out = model->forward(batch_from(in));
  check_close("logits", out.logits, want.at("logits", "bert_seqcls"));
  check_close("last_hidden_state", out.last_hidden_state, want.at("last_hidden_state", "bert_seqcls"));
  check_close("loss", out.loss, want.at("loss", "bert_seqcls"), 0, 1e-5);
  out.loss.backward();
  check_gradients(*model, test::hf_fixture("bert_seqcls"));
}

TEST_CASE("parity: GPT2LMHeadModel matches HF outputs with loss and gradients", "[models][parity]") {
  auto model = load("gpt2");
  const auto in = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors"));
  const auto want = io::read_safetensors(test::hf_fixture("gpt2/expected.safetensors"));
  Output out = model->forward(batch_from(in));
  check_close("logits", out.logits, want.at("logits", "gpt2"));
  check_close("last_hidden_state", out.last_hidden_state, want.at("last_hidden_state", "gpt2"));
  REQUIRE(out.hidden_states.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    check_close("hidden_states." + std::to_string(i), out.hidden_states[i],
                want.at("hidden_states." + std::to_string(i), "gpt2"));
  }
  check_close("loss", out.loss, want.at("loss", "gpt2"), 0, 1e-5);
  out.loss.backward();
  check_gradients(*model, test::hf_fixture("gpt2"));

  model->full_logits = false;  // the training path: projection only where labels are
  check_close("loss (sparse)", model->forward(batch_from(in)).loss, want.at("loss", "gpt2"), 0, 1e-5);
}

TEST_CASE("parity: T5ForConditionalGeneration (v1.0 relu tied / v1.1 gated-gelu untied) matches HF", "[models][parity]") {
  for (const std::string name : {"t5_relu", "t5_gated_gelu"}) {
    INFO(name);
    auto model = load(name);
    const auto in = io::read_safetensors(test::hf_fixture(name + "/inputs.safetensors"));
    const auto want = io::read_safetensors(test::hf_fixture(name + "/expected.safetensors"));
    Output out = model->forward(batch_from(in));
    check_close("logits", out.logits, want.at("logits", name), 1e-4, 1e-4);
    check_close("encoder_last_hidden_state", out.encoder_last_hidden_state, want.at("encoder_last_hidden_state", name));
    check_close("decoder_last_hidden_state", out.last_hidden_state, want.at("decoder_last_hidden_state", name));
    for (size_t i = 0; i < 3; ++i) {
      check_close("encoder_hidden_states", out.encoder_hidden_states.at(i),
                  want.at("encoder_hidden_states." + std::to_string(i), name));
      check_close("decoder_hidden_states", out.hidden_states.at(i),
                  want.at("decoder_hidden_states." + std::to_string(i), name));
    }
    check_close("loss", out.loss, want.at("loss", name), 0, 1e-5);
    out.loss.backward();
    check_gradients(*model, test::hf_fixture(name));

    // Labels alone (decoder inputs derived by shift_right) give the same loss.
    Batch labels_only = batch_from(in);
    labels_only.decoder_input_ids = at::Tensor();
    model->full_logits = false;
    check_close("loss (labels only, sparse)", model->forward(labels_only).loss, want.at("loss", name), 0, 1e-5);

    auto& t5 = dynamic_cast<models::T5Impl&>(*model);
    at::NoGradGuard ng;
    check_close("encoder_position_bias", t5.encoder->relative_bias(14, 14), want.at("encoder_position_bias", name), 1e-6, 0);
    check_close("decoder_position_bias", t5.decoder->relative_bias(7, 7), want.at("decoder_position_bias", name), 1e-6, 0);
    const at::Tensor rel = in.at("relative_position", name);
    CHECK(at::equal(nn::relative_position_bucket(rel, true, 32, 128), want.at("relative_position_bucket_bidirectional", name)));
    CHECK(at::equal(nn::relative_position_bucket(rel, false, 32, 128),
                    want.at("relative_position_bucket_unidirectional", name)));
  }
}
