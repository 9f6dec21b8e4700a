// SpanBERT's span boundary objective (models/span_boundary.h): spans derived from
// the labels, the head's inputs, its gradient against finite differences, and the
// BERT and RoBERTa span-pretraining models that carry it as the loss term "sbo".
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/models/bert.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/span_boundary.h"
#include "lmkit/nn/transformer_layer.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json tiny(const std::string& type, const std::string& arch) {
  return {{"model_type", type},     {"vocab_size", 40},     {"hidden_size", 8},
          {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 16},
          {"max_position_embeddings", 24}, {"span_boundary_max_targets", 3}, {"span_boundary_position_size", 4},
          {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}, {"architectures", Json::array({arch})}};
}

at::Tensor longs(std::vector<int64_t> v, int64_t rows) {
  return at::tensor(v, at::kLong).view({rows, static_cast<int64_t>(v.size()) / rows});
}

// Row 0: spans [2,3] and [5,9] (five tokens, of which max_targets 3 are predicted);
// row 1: a run touching position 0 and one touching the end (no boundary: none predicted), and [3].
Batch span_batch() {
  Batch b;
  b.input_ids = longs({2, 5, 3, 3, 6, 3, 3, 3, 3, 3, 7, 2,  //
                       3, 3, 8, 3, 9, 10, 11, 12, 13, 14, 3, 3}, 2);
  b.labels = longs({-100, -100, 11, 12, -100, 13, 14, 15, 16, 17, -100, -100,  //
                    20, 21, -100, 22, -100, -100, -100, -100, -100, -100, 23, 24}, 2);
  return b;
}

}  // namespace

TEST_CASE("sbo: spans are the runs of labels, with boundaries either side and positions from the start", "[models][spanbert]") {
  const Batch b = span_batch();
  const models::SpanTargets s = models::span_targets(b.labels, 3);
  // Row 0: 2,3 (boundaries 1, 4); 5,6,7 of 5..9 (boundaries 4, 10). Row 1: 15 (= 12 + 3; boundaries 14, 16).
  CHECK(at::equal(s.index, longs({2, 3, 5, 6, 7, 15}, 1).view({-1})));
  CHECK(at::equal(s.left, longs({1, 1, 4, 4, 4, 14}, 1).view({-1})));
  CHECK(at::equal(s.right, longs({4, 4, 10, 10, 10, 16}, 1).view({-1})));
  CHECK(at::equal(s.relative, longs({0, 1, 0, 1, 2, 0}, 1).view({-1})));
  CHECK(at::equal(s.labels, longs({11, 12, 13, 14, 15, 22}, 1).view({-1})));
  CHECK(models::count_span_targets(b.labels, 3) == 6);
  CHECK(models::count_span_targets(b.labels, 10) == 8);
  CHECK(models::count_span_targets(at::full({2, 5}, -100, at::kLong), 10) == 0);
}

TEST_CASE("sbo: the head reads [x_{s-1}; x_{e+1}; p_{i-s}] through two GELU + LayerNorm layers", "[models][spanbert]") {
  models::SpanBoundaryOptions o;
  o.hidden_size = 8, o.vocab_size = 40, o.max_targets = 3, o.position_size = 4;
  models::SpanBoundaryHead head(o);
  const at::Tensor hidden = at::randn({2, 12, 8});
  const models::SpanTargets s = models::span_targets(span_batch().labels, 3);
  const at::Tensor got = head->forward(hidden, s);
  const at::Tensor rows = hidden.reshape({24, 8});
  // Target 4 (position 7 of row 0): boundaries 4 and 10, relative position 2.
  const at::Tensor x = at::cat({rows[4], rows[10], head->positions->weight[2]});
  const at::Tensor h1 = at::layer_norm(at::gelu(head->first(x)), {8}, head->first_norm->weight, head->first_norm->bias, 1e-12);
  const at::Tensor h2 = at::layer_norm(at::gelu(head->second(h1)), {8}, head->second_norm->weight, head->second_norm->bias, 1e-12);
  CHECK(test::max_abs_diff(got[4], h2) < 1e-5);
}

TEST_CASE("sbo: the gradient of the span boundary term matches finite differences", "[models][spanbert]") {
  auto model = std::dynamic_pointer_cast<models::BertImpl>(
      models::create_model(tiny("bert", "BertForSpanPreTraining"), "tiny"));
  REQUIRE(model);
  model->to(at::kDouble);
  model->eval();
  // Non-zero biases and norms, so that every parameter's gradient is generic.
  {
    at::NoGradGuard g;
    for (auto& p : model->parameters()) p.add_(at::randn_like(p) * 0.1);
  }
  const Batch b = span_batch();
  auto sbo = [&] { return model->forward(b).term("sbo")->mean; };
  model->zero_grad();
  sbo().backward();
  struct Probe {
    const char* name;
    at::Tensor param;
  };
  const std::vector<Probe> probes = {{"head first", model->span_boundary->first->weight},
                                     {"head second norm", model->span_boundary->second_norm->weight},
                                     {"positions", model->span_boundary->positions->weight},
                                     {"head bias", model->span_boundary->bias},
                                     {"word embeddings", model->word_embeddings->weight},
                                     {"encoder", model->layers->ptr<nn::TransformerLayerImpl>(0)->ffn->in->weight}};
  at::NoGradGuard no_grad;
  int64_t checked = 0;
  for (const auto& probe : probes) {
    at::Tensor flat = probe.param.view({-1}), grad = probe.param.grad().view({-1});
    for (int64_t k = 0; k < flat.numel(); k += std::max<int64_t>(1, flat.numel() / 7)) {
      const double saved = flat[k].item<double>(), h = 1e-6;
      flat[k].fill_(saved + h);
      const double up = sbo().item<double>();
      flat[k].fill_(saved - h);
      const double down = sbo().item<double>();
      flat[k].fill_(saved);
      const double numeric = (up - down) / (2 * h), analytic = grad[k].item<double>();
      INFO(probe.name << "[" << k << "]: analytic " << analytic << " numeric " << numeric);
      CHECK(std::abs(analytic - numeric) <= 1e-7 + 1e-6 * std::abs(numeric));
      ++checked;
    }
  }
  CHECK(checked >= 40);
}

TEST_CASE("sbo: BERT and RoBERTa span pretraining report mlm and sbo terms, counted as loss_targets says", "[models][spanbert]") {
  for (const auto& [type, arch, prefix] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"bert", "BertForSpanPreTraining", "cls.pair_target_predictions."},
           {"roberta", "RobertaForSpanPreTraining", "pair_target_predictions."}}) {
    auto model = models::create_model(tiny(type, arch), "tiny");
    CHECK(model->architecture() == arch);
    model->eval();
    const Batch b = span_batch();
    const Output out = model->forward(b);
    REQUIRE(out.terms.size() == 2);
    CHECK(out.terms[0].name == "mlm");
    CHECK(out.terms[1].name == "sbo");
    CHECK(out.terms[0].targets.item<int64_t>() == 12);
    CHECK(out.terms[1].targets.item<int64_t>() == 6);
    CHECK(model->loss_targets(b) == std::vector<std::pair<std::string, int64_t>>{{"mlm", 12}, {"sbo", 6}});
    CHECK(out.loss.item<double>() == Approx((out.terms[0].mean + out.terms[1].mean).item<double>()));
    // The head's tensors carry SpanBERT's names, and its sizes are in config.json.
    int64_t head_tensors = 0;
    for (const auto& t : model->hf_tensors()) head_tensors += t.name.rfind(prefix, 0) == 0;
    CHECK(head_tensors == 10);
    const Json config = model->config_json();
    CHECK(config["span_boundary_max_targets"] == 3);
    CHECK(config["span_boundary_position_size"] == 4);
    const std::string masked_lm = type == "bert" ? "BertForMaskedLM" : "RobertaForMaskedLM";
    CHECK(model->flops_per_token(12, 0) > models::create_model(tiny(type, masked_lm), "tiny")->flops_per_token(12, 0));
  }
}
