// --dtype bf16-weights: the step sees the bf16 rounding of every weight (the loss equals a
// forward with the rounded weights under autocast), and the float32 masters keep what bf16
// cannot hold: updates smaller than a bf16 step accumulate.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/autocast.h"
#include "lmkit/core/error.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/step.h"

using namespace lmkit;

namespace {

std::shared_ptr<models::Model> tiny_gpt() {
  const Json config = {{"model_type", "gpt2"}, {"vocab_size", 97}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
                       {"n_positions", 32},    {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
  return models::create_model(config, "tiny.json", "GPT2LMHeadModel");
}

Batch tokens() {
  Batch b;
  b.input_ids = at::randint(0, 97, {4, 16}, at::kLong);
  b.labels = b.input_ids.clone();
  return b;
}

}  // namespace

TEST_CASE("precision: parse_precision takes fp32, bf16 and bf16-weights and names the flag otherwise",
          "[train][precision]") {
  CHECK(train::parse_precision("fp32") == train::Precision::kFp32);
  CHECK(train::parse_precision("bf16") == train::Precision::kBf16);
  CHECK(train::parse_precision("bf16-weights") == train::Precision::kBf16Weights);
  CHECK_THROWS_WITH(train::parse_precision("fp16"), Catch::Contains("--dtype 'fp16'") && Catch::Contains("bf16-weights"));
}

TEST_CASE("precision: a bf16-weights step computes with the bf16 rounding of every weight, float32 after it",
          "[train][precision]") {
  at::manual_seed(21);
  auto model = tiny_gpt();
  const Batch batch = tokens();
  // The loss of the weights rounded to bf16, under autocast, before the step.
  auto rounded = tiny_gpt();
  {
    at::NoGradGuard no_grad;
    auto a = model->parameters(), b = rounded->parameters();
    for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i].to(at::kBFloat16).to(at::kFloat));
  }
  double expected = 0, autocast_only = 0;
  {
    at::NoGradGuard no_grad;
    AutocastGuard autocast(c10::Device(c10::kCPU), true);
    for (auto& p : rounded->parameters()) p.set_data(p.data().to(at::kBFloat16));
    expected = rounded->forward(batch).loss.item<double>();
    autocast_only = model->forward(batch).loss.item<double>();
  }
  const std::vector<at::Tensor> before = [&] {
    std::vector<at::Tensor> out;
    for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  }();
  auto optimizer = train::make_adamw(*model, {1e-4, 0.0});
  const auto r = train::train_step(*model, *optimizer, {batch}, 1.0, train::Precision::kBf16Weights);
  REQUIRE(r.finite);
  CHECK(r.loss == expected);            // the step saw the bf16 weights (the embeddings too)
  CHECK(r.loss != autocast_only);       // which autocast alone does not round
  // After the step: float32 masters, float32 gradients, moved by less than bf16 resolves.
  size_t finer = 0;
  const auto after = model->parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].scalar_type() == at::kFloat);
    REQUIRE(after[i].grad().defined());
    CHECK(after[i].grad().scalar_type() == at::kFloat);
    CHECK_FALSE(at::equal(after[i], before[i]));
    // lr 1e-4 on values of order 0.02–1: a bf16 copy would have lost most of these updates.
    if (!at::equal(after[i].to(at::kBFloat16).to(at::kFloat), after[i])) ++finer;
  }
  CHECK(finer == after.size());
  // The same step in plain autocast differs (another rounding), and both go on training.
  auto twin = tiny_gpt();
  {
    at::NoGradGuard no_grad;
    auto a = twin->parameters();
    for (size_t i = 0; i < a.size(); ++i) a[i].copy_(before[i]);
  }
  auto twin_optimizer = train::make_adamw(*twin, {1e-4, 0.0});
  const auto t = train::train_step(*twin, *twin_optimizer, {batch}, 1.0, train::Precision::kBf16);
  CHECK(t.loss == autocast_only);
}
