#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <set>

#include <CLI/CLI.hpp>

#include "lmkit/models/registry.h"
#include "lmkit/train/step.h"

using namespace lmkit;

namespace {

// Two identical small models, one trained by torch::optim::AdamW, one by FusedAdamW.
torch::nn::Sequential tiny_model() {
  return torch::nn::Sequential(torch::nn::Linear(7, 13), torch::nn::Linear(13, 3));
}

void copy_weights(torch::nn::Sequential& from, torch::nn::Sequential& to) {
  at::NoGradGuard no_grad;
  auto a = from->parameters(), b = to->parameters();
  for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
}

}  // namespace

TEST_CASE("FusedAdamW: the same updates as torch::optim::AdamW, with weight decay and a gradient scale",
          "[train][optimizer]") {
  at::manual_seed(2);
  auto reference = tiny_model(), fused = tiny_model();
  copy_weights(reference, fused);
  auto options = torch::optim::AdamWOptions(3e-2).betas({0.9, 0.98}).eps(1e-6).weight_decay(0.1);
  torch::optim::AdamW ref_opt(reference->parameters(), options);
  train::FusedAdamW fused_opt(fused->parameters(), options);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor x = at::randn({16, 7});
    const double scale = step % 2 == 0 ? 1.0 : 0.37;
    for (auto* m : {&reference, &fused}) {
      (*m)->zero_grad();
      (*m)->forward(x).pow(2).mean().backward();
    }
    {
      at::NoGradGuard no_grad;
      for (auto& p : reference->parameters()) p.grad().mul_(scale);
    }
    fused_opt.set_grad_scale(scale);
    ref_opt.step();
    fused_opt.step();
  }
  auto a = reference->parameters(), b = fused->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].sub(b[i]).abs().max().item<double>() < 1e-6);
  }
  // Same state, so checkpoints are interchangeable.
  const auto& state = fused_opt.state();
  REQUIRE(state.size() == a.size());
  for (const auto& entry : state) {
    CHECK(static_cast<const torch::optim::AdamWParamState&>(*entry.second).step() == 5);
  }
}

TEST_CASE("FusedAdamW: falls back to torch::optim::AdamW for amsgrad, and the scale still applies",
          "[train][optimizer]") {
  at::manual_seed(4);
  auto reference = tiny_model(), fused = tiny_model();
  copy_weights(reference, fused);
  auto options = torch::optim::AdamWOptions(1e-2).amsgrad(true);
  torch::optim::AdamW ref_opt(reference->parameters(), options);
  train::FusedAdamW fused_opt(fused->parameters(), options);
  const at::Tensor x = at::randn({4, 7});
  for (auto* m : {&reference, &fused}) (*m)->forward(x).sum().backward();
  {
    at::NoGradGuard no_grad;
    for (auto& p : reference->parameters()) p.grad().mul_(0.5);
  }
  fused_opt.set_grad_scale(0.5);
  ref_opt.step();
  fused_opt.step();
  auto a = reference->parameters(), b = fused->parameters();
  for (size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
}

TEST_CASE("optimizer registry: lmkit's four in order, unknown names and bad registrations refused", "[train][optimizer]") {
  std::vector<std::string> names;
  for (const auto& o : train::optimizers()) names.push_back(o.name);
  REQUIRE(names.size() >= 4);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 4) ==
        std::vector<std::string>{"adamw", "adafactor", "lamb", "muon"});
  CHECK(train::optimizer("adamw").shardable);
  CHECK_FALSE(train::optimizer("lamb").shardable);
  CHECK_FALSE(train::optimizer("adafactor").shardable);
  CHECK_FALSE(train::optimizer("muon").shardable);
  CHECK_THROWS_WITH(train::optimizer("sgd"), Catch::Contains("unknown optimizer 'sgd' (expected adamw, adafactor"));
  train::OptimizerSpec twice = train::optimizer("lamb");
  CHECK_THROWS_WITH(train::register_optimizer(twice), Catch::Contains("optimizer 'lamb' is registered twice: by lmkit"));
  train::OptimizerSpec loose = twice;
  loose.name = "lamb2";
  loose.flags = {{"trust-clip", 10.0, "a flag not spelt --lamb2-...", {}}};
  CHECK_THROWS_WITH(train::register_optimizer(loose), Catch::Contains("its flag --trust-clip must be spelt --lamb2-..."));
}

TEST_CASE("optimizer flags: a value out of range is one line naming the flag and its range; sharding is checked by name",
          "[train][optimizer]") {
  auto parse_error = [](std::vector<std::string> args) -> std::string {
    CLI::App app("test");
    train::OptimizerFlags flags;
    train::ParallelFlags parallel;
    train::add_optimizer_flags(app, flags);
    train::add_shard_flag(app, parallel);
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  // CLI11's own checks said "Value 0 not in range 0.000000 to 1797693134862315708145...".
  CHECK(parse_error({"--adam-eps", "0"}) == "--adam-eps: 0 is out of range: must be > 0");
  CHECK(parse_error({"--adam-beta1", "1"}) == "--adam-beta1: 1 is out of range: must be in [0, 1)");
  CHECK(parse_error({"--adam-beta2", "0.9999999"}).empty());
  CHECK(parse_error({"--shard-optimizer", "3"}) == "--shard-optimizer: 3 is out of range: must be in [0, 2]");
  auto flags = [](int stage, double bucket_mb, bool overlap_given = false) {
    train::ParallelFlags f;
    f.shard_optimizer = stage, f.bucket_mb = bucket_mb, f.overlap_given = overlap_given;
    return f;
  };
  CHECK_THROWS_WITH(train::check_parallel_flags(flags(1, 0), "adamw", false), Catch::Contains("start the run with torchrun"));
  CHECK_THROWS_WITH(train::check_parallel_flags(flags(2, 0), "lamb", true), Catch::Contains("--optimizer lamb cannot be sharded"));
  CHECK_NOTHROW(train::check_parallel_flags(flags(2, 25), "adamw", true));
  // The overlap belongs to a sharded optimizer: alone it would do nothing.
  CHECK_NOTHROW(train::check_parallel_flags(flags(1, 0, true), "adamw", true));
  CHECK_THROWS_WITH(train::check_parallel_flags(flags(0, 0, true), "adamw", true),
                    "--[no-]overlap-param-gather applies to a sharded optimizer's all-gather: give it with "
                    "--shard-optimizer 1 or 2");
}

TEST_CASE("--overlap-param-gather: on by default, --no-overlap-param-gather turns it off, either spelling counts as given",
          "[train][optimizer]") {
  auto parse = [](std::vector<std::string> args) {
    CLI::App app("test");
    train::ParallelFlags parallel;
    train::add_shard_flag(app, parallel);
    std::reverse(args.begin(), args.end());
    app.parse(args);
    return parallel;
  };
  CHECK(parse({}).overlap_param_gather);
  CHECK_FALSE(parse({}).overlap_given);
  CHECK_FALSE(parse({"--no-overlap-param-gather"}).overlap_param_gather);
  CHECK(parse({"--no-overlap-param-gather"}).overlap_given);
  CHECK(parse({"--overlap-param-gather"}).overlap_param_gather);
  CHECK(parse({"--overlap-param-gather"}).overlap_given);
}

TEST_CASE("Muon: the layers' weight matrices go to Muon, embeddings, biases and norms to AdamW", "[train][optimizer]") {
  auto model = models::create_model({{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 2},
                                     {"n_head", 2}, {"n_positions", 32}},
                                    "tiny.json", "GPT2LMHeadModel");
  const train::ModelParameters params = train::model_parameters(*model);
  CAPTURE(std::vector<std::string>(params.tables.begin(), params.tables.end()));
  CHECK(params.tables.count("wte.weight") == 1);
  CHECK(params.tables.size() == 2);  // the tokens' table and the positions' table
  train::OptimizerOptions o;
  o.name = "muon";
  auto muon = train::make_optimizer(params, o);
  REQUIRE(muon->param_groups().size() == 3);
  const auto& role = [&](size_t g) { return static_cast<const train::GroupOptions&>(muon->param_groups()[g].options()).role(); };
  CHECK(role(0) == "matrix");
  CHECK(role(1) == "adamw");
  std::set<at::TensorImpl*> matrices;
  for (const auto& p : muon->param_groups()[0].params()) matrices.insert(p.unsafeGetTensorImpl());
  int64_t expected = 0;
  for (const auto& [name, p] : params.named) {
    const bool layer_matrix = p.dim() == 2 && name.rfind("layers.", 0) == 0;
    expected += layer_matrix;
    INFO(name);
    CHECK(matrices.count(p.unsafeGetTensorImpl()) == (layer_matrix ? 1u : 0u));
  }
  CHECK(expected == 8);  // 4 matrices a layer: qkv, attention out, MLP in and out
  CHECK(static_cast<int64_t>(matrices.size()) == expected);
}

TEST_CASE("Adafactor: factored second moments for matrices, full ones for vectors, in the checkpoint format",
          "[train][optimizer]") {
  at::manual_seed(1);
  auto model = tiny_model();
  train::OptimizerOptions o;
  o.name = "adafactor";
  o.lr = 1e-2;
  auto opt = train::make_optimizer(*model, o);
  auto loss = model->forward(at::randn({5, 7})).pow(2).mean();
  loss.backward();
  opt->step();
  const at::Tensor w = model->parameters()[0];  // (13, 7)
  const auto& st = static_cast<const train::TensorState&>(*opt->state().at(w.unsafeGetTensorImpl()));
  CHECK(st.step == 1);
  CHECK(st.tensors.at("exp_avg_sq_row").sizes() == at::IntArrayRef{13});
  CHECK(st.tensors.at("exp_avg_sq_col").sizes() == at::IntArrayRef{7});
  CHECK(st.tensors.count("exp_avg") == 0);  // no first moment unless --adafactor-beta1
  const at::Tensor b = model->parameters()[1];  // (13)
  CHECK(static_cast<const train::TensorState&>(*opt->state().at(b.unsafeGetTensorImpl())).tensors.at("exp_avg_sq").sizes() ==
        at::IntArrayRef{13});
}
