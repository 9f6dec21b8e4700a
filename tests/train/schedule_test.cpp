#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "lmkit/models/registry.h"
#include "lmkit/train/schedule.h"
#include "lmkit/train/step.h"

#include <ATen/autocast_mode.h>

using namespace lmkit;
using train::learning_rate;
using train::Schedule;

TEST_CASE("schedule: warmup then linear, cosine, constant and inverse-sqrt", "[train][schedule]") {
  train::ScheduleOptions o;
  o.lr = 1.0, o.warmup = 10, o.total_steps = 110;
  o.schedule = Schedule::kLinear;
  CHECK(learning_rate(o, 1) == Approx(0.1));
  CHECK(learning_rate(o, 10) == Approx(1.0));
  CHECK(learning_rate(o, 60) == Approx(0.5));
  CHECK(learning_rate(o, 110) == Approx(0.0));
  o.schedule = Schedule::kCosine;
  o.min_lr_ratio = 0.1;
  CHECK(learning_rate(o, 10) == Approx(1.0));
  CHECK(learning_rate(o, 60) == Approx(0.1 + 0.9 * 0.5));
  CHECK(learning_rate(o, 110) == Approx(0.1));
  o.schedule = Schedule::kConstant;
  CHECK(learning_rate(o, 5) == Approx(0.5));
  CHECK(learning_rate(o, 100) == Approx(1.0));
  // Vaswani et al. §5.3: d^-0.5 · min(step^-0.5, step · warmup^-1.5) with lr = d^-0.5 · warmup^-0.5.
  o.schedule = Schedule::kInverseSqrt;
  o.warmup = 4000, o.total_steps = 100000, o.lr = std::pow(512.0, -0.5) * std::pow(4000.0, -0.5);
  for (int64_t step : {1, 100, 3999, 4000, 4001, 20000, 99999}) {
    const double vaswani = std::pow(512.0, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000.0, -1.5));
    CHECK(learning_rate(o, step) == Approx(vaswani).epsilon(1e-9));
  }
  CHECK_THROWS_WITH(train::parse_schedule("triangle"), Catch::Contains("unknown schedule 'triangle'"));
}

TEST_CASE("train step: a non-finite loss skips the update and leaves the weights unchanged", "[train][step]") {
  at::manual_seed(0);
  auto model = models::create_model({{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 1},
                                     {"n_head", 2}, {"n_positions", 16}},
                                    "tiny.json");
  auto optimizer = train::make_adamw(*model, {1e-2});
  Batch b;
  b.input_ids = at::randint(0, 50, {2, 8}, at::kLong);
  b.labels = b.input_ids;
  // A finite step changes the weights and reports the loss and norm.
  auto before = model->parameters()[0].clone();
  auto ok = train::train_step(*model, *optimizer, {b}, 1.0, false);
  CHECK(ok.finite);
  CHECK(std::isfinite(ok.loss));
  CHECK(ok.grad_norm > 0);
  CHECK_FALSE(at::equal(before, model->parameters()[0]));
  // Poison one weight: the loss is NaN, nothing is updated.
  {
    at::NoGradGuard ng;
    model->parameters().back().fill_(std::numeric_limits<float>::quiet_NaN());
  }
  auto snapshot = model->parameters()[0].clone();
  auto bad = train::train_step(*model, *optimizer, {b}, 1.0, false);
  CHECK_FALSE(bad.finite);
  CHECK(at::equal(snapshot, model->parameters()[0]));
}

TEST_CASE("train step: bf16 autocast trains with float32 master weights", "[train][step]") {
  at::manual_seed(1);
  auto model = models::create_model({{"model_type", "bert"}, {"vocab_size", 60}, {"hidden_size", 32},
                                     {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 64},
                                     {"max_position_embeddings", 16}},
                                    "tiny.json", "BertForMaskedLM");
  auto optimizer = train::make_adamw(*model, {1e-2});
  Batch b;
  b.input_ids = at::randint(5, 60, {4, 12}, at::kLong);
  b.labels = at::where(at::rand({4, 12}).lt(0.3), b.input_ids, at::full_like(b.input_ids, -100));
  b.labels[0][0] = 7;
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = train::train_step(*model, *optimizer, {b}, 1.0, /*bf16=*/true);
    REQUIRE(r.finite);
    (i == 0 ? first : last) = r.loss;
  }
  CHECK(last < first - 1.0);  // it learns (memorises the batch)
  for (const auto& p : model->parameters()) CHECK(p.scalar_type() == at::kFloat);
  CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));  // the guard restored the state
}
