// lmkit's fused kernels (nn/fused.h) against the ATen composites they replace, forward and
// backward, on the GPU ("[cuda][fused]", skipped without a CUDA device) and, through the
// kernels' host implementation (the same row math, kernel_rows.h, one worker a row), on the
// CPU in every CI run ("[fused][host]": the autograd wiring, saved tensors, gradient count,
// dtypes and the replayed dropout mask). Tolerances: float32 inputs 1e-5 (absolute, on values
// of order 1; the kernels sum in another order), bf16 inputs 2e-2 relative to the largest
// value (one bf16 rounding of an intermediate the composite rounds elsewhere). The last tests
// check that the CPU takes the composite unless the host path is switched on.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <tuple>

#include "lmkit/core/autocast.h"
#include "lmkit/core/cuda.h"
#include "lmkit/models/losses.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/position.h"
#include "test_util.h"

using namespace lmkit;

namespace {

const c10::Device kGpu(c10::kCUDA, 0);

bool no_cuda() {
  if (lmkit::cuda_available() && nn::fused_kernels_built()) return false;
  std::cout << "LMKIT_SKIP: no CUDA device on this machine (or a build without the fused kernels)" << std::endl;
  return true;
}

const c10::Device kHost(c10::kCPU);

// Runs fn with the device's fused path (the CUDA kernels, or their host implementation on the
// CPU; with `cpu_path`, the residual step's CPU path instead) on (true) or off, restoring the
// settings after. The CPU path is off otherwise: "off" is the composite alone.
template <typename Fn>
auto with_fused(const c10::Device& device, bool on, Fn&& fn, bool cpu_path = false) {
  auto set = [&](bool v) { return device.is_cuda() ? nn::set_fused_kernels_enabled(v) : nn::set_host_kernels_enabled(v); };
  const bool cpu_before = nn::set_cpu_kernels_enabled(cpu_path && on);
  const bool before = set(on && !cpu_path);
  auto out = fn();
  set(before);
  nn::set_cpu_kernels_enabled(cpu_before);
  return out;
}

double rel(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kFloat), y = b.to(at::kFloat);
  return test::max_abs_diff(x, y) / std::max(1e-6, y.abs().max().item<double>());
}

struct NormCase {
  nn::NormType type;
  at::ScalarType x_type, h_type;
};

// {s, y, dx, dh, dw, db} of the residual step under upstream gradients gs, gy.
std::vector<at::Tensor> residual_step(nn::Norm& norm, const at::Tensor& x0, const at::Tensor& h0, double p,
                                      const at::Tensor& gs, const at::Tensor& gy) {
  at::Tensor x = x0.clone().requires_grad_(true), h = h0.clone().requires_grad_(true);
  for (auto& q : norm->parameters()) q.mutable_grad() = at::Tensor();
  auto [s, y] = nn::residual_norm(x, h, p, true, norm);
  ((s.to(at::kFloat) * gs).sum() + (y * gy).sum()).backward();
  std::vector<at::Tensor> out = {s.detach(), y.detach(), x.grad(), h.grad(), norm->weight.grad()};
  out.push_back(norm->bias.defined() ? norm->bias.grad() : at::Tensor());
  return out;
}

void residual_norm_parity(const c10::Device& dev) {
  at::manual_seed(11);
  for (const NormCase c : {NormCase{nn::NormType::kLayerNorm, at::kFloat, at::kFloat},
                           NormCase{nn::NormType::kLayerNorm, at::kFloat, at::kBFloat16},
                           NormCase{nn::NormType::kLayerNorm, at::kBFloat16, at::kBFloat16},
                           NormCase{nn::NormType::kRmsNorm, at::kFloat, at::kFloat},
                           NormCase{nn::NormType::kRmsNorm, at::kFloat, at::kBFloat16}}) {
    for (int64_t d : {64, 768, 1000}) {  // one warp's share per row: under, over and not a multiple of 32
      INFO("norm " << static_cast<int>(c.type) << " x " << c.x_type << " h " << c.h_type << " d " << d);
      nn::Norm norm(nn::NormOptions(d).type(c.type).eps(1e-5));
      norm->to(dev);
      {
        at::NoGradGuard no_grad;
        norm->weight.copy_(at::randn({d}) * 0.5 + 1);
        if (norm->bias.defined()) norm->bias.copy_(at::randn({d}) * 0.1);
      }
      const at::Tensor x = at::randn({3, 37, d}, at::TensorOptions().device(dev)).to(c.x_type);
      const at::Tensor h = at::randn({3, 37, d}, at::TensorOptions().device(dev)).to(c.h_type);
      const at::Tensor gs = at::randn({3, 37, d}, x.options().dtype(at::kFloat));
      const at::Tensor gy = at::randn({3, 37, d}, x.options().dtype(at::kFloat));
      auto fused = with_fused(dev, true, [&] { return residual_step(norm, x, h, 0.0, gs, gy); });
      auto composite = with_fused(dev, false, [&] { return residual_step(norm, x, h, 0.0, gs, gy); });
      const bool reduced = c.x_type == at::kBFloat16 || c.h_type == at::kBFloat16;
      const double tol = reduced ? 2e-2 : 1e-5;
      const char* names[] = {"s", "y", "dx", "dh", "dw", "db"};
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO(names[i]);
        REQUIRE(fused[i].defined() == composite[i].defined());
        if (!fused[i].defined()) continue;
        CHECK(fused[i].scalar_type() == composite[i].scalar_type());
        CHECK(rel(fused[i], composite[i]) < (i >= 4 ? 5 * tol : tol));  // dw, db: sums over 111 rows
      }
    }
  }
}

void residual_dropout_replay(const c10::Device& dev) {
  const int64_t d = 512;
  nn::Norm norm{nn::NormOptions(d)};
  norm->to(dev);
  const auto opts = at::TensorOptions().device(dev);
  at::manual_seed(12);
  // |h| >= 0.5 everywhere, so a kept element moves the sum by at least 0.5 / (1 - p) and a dropped one
  // by exactly 0: the mask read back from s - x below is the kernel's own (randn + 3 put ~8 kept
  // elements a run under any threshold near 0).
  const at::Tensor x = at::randn({64, 33, d}, opts);
  const at::Tensor r = at::randn({64, 33, d}, opts), h = at::where(r.ge(0), r + 0.5, r - 0.5);
  const at::Tensor gs = at::randn_like(x), gy = at::randn_like(x);
  const double p = 0.1;
  at::manual_seed(13);
  auto a = with_fused(dev, true, [&] { return residual_step(norm, x, h, p, gs, gy); });
  at::manual_seed(13);
  auto b = with_fused(dev, true, [&] { return residual_step(norm, x, h, p, gs, gy); });
  for (size_t i = 0; i < 5; ++i) CHECK(at::equal(a[i], b[i]));  // the same generator state, the same bits
  const at::Tensor kept = (a[0] - x).abs().gt(0.25);             // where h reached the sum
  const double dropped = 1.0 - kept.to(at::kDouble).mean().item<double>();
  CHECK(dropped == Approx(p).margin(0.005));  // 1.08M draws: the standard error is 0.0003
  // The composite with that mask gives the same step.
  const at::Tensor mask = kept.to(at::kFloat) / (1 - p);
  at::Tensor xr = x.clone().requires_grad_(true), hr = h.clone().requires_grad_(true);
  for (auto& q : norm->parameters()) q.mutable_grad() = at::Tensor();
  at::Tensor s = xr + hr * mask, y = with_fused(dev, false, [&] { return norm(s); });
  ((s * gs).sum() + (y * gy).sum()).backward();
  CHECK(test::max_abs_diff(a[0], s.detach()) < 1e-5);
  CHECK(test::max_abs_diff(a[1], y.detach()) < 1e-4);
  CHECK(test::max_abs_diff(a[2], xr.grad()) < 1e-4);
  CHECK(test::max_abs_diff(a[3], hr.grad()) < 1e-4);
  CHECK(rel(a[4], norm->weight.grad()) < 1e-4);
}

void gelu_bias_parity(const c10::Device& dev) {
  at::manual_seed(14);
  for (bool bf16 : {false, true}) {
    for (bool tanh_approx : {false, true}) {
      INFO("bf16 " << bf16 << " tanh " << tanh_approx);
      torch::nn::Linear layer(torch::nn::LinearOptions(96, 384));
      layer->to(dev);
      const at::Tensor x0 = at::randn({4, 50, 96}, at::TensorOptions().device(dev));
      const at::Tensor gy = at::randn({4, 50, 384}, x0.options());
      auto run = [&](bool fused) {
        return with_fused(dev, fused, [&] {
          at::Tensor x = x0.clone().requires_grad_(true);
          layer->weight.mutable_grad() = at::Tensor(), layer->bias.mutable_grad() = at::Tensor();
          at::Tensor y;
          {
            AutocastGuard autocast(dev, bf16);
            y = nn::linear_gelu(layer, x, tanh_approx);
          }
          (y.to(at::kFloat) * gy).sum().backward();
          return std::vector<at::Tensor>{y.detach(), x.grad(), layer->weight.grad(), layer->bias.grad()};
        });
      };
      auto fused = run(true), composite = run(false);
      const double tol = bf16 ? 2e-2 : 1e-5;
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("output " << i);
        CHECK(fused[i].scalar_type() == composite[i].scalar_type());
        CHECK(fused[i].sizes() == composite[i].sizes());
        CHECK(rel(fused[i], composite[i]) < (i >= 2 ? 5 * tol : tol));
      }
    }
  }
}

void cross_entropy_parity(const c10::Device& dev) {
  at::manual_seed(15);
  const auto opts = at::TensorOptions().device(dev);
  for (bool bf16 : {false, true}) {
    for (double smoothing : {0.0, 0.1}) {
      for (bool with_bias : {false, true}) {
        INFO("bf16 " << bf16 << " smoothing " << smoothing << " bias " << with_bias);
        const at::Tensor hidden0 = at::randn({300, 64}, opts);
        const at::Tensor weight0 = at::randn({1000, 64}, opts) * 0.2;  // padded to 1024 inside
        const at::Tensor bias0 = with_bias ? at::randn({1000}, opts) * 0.1 : at::Tensor();
        at::Tensor targets = at::randint(0, 1000, {300}, opts.dtype(at::kLong));
        targets.index_put_({at::indexing::Slice(0, 300, 9)}, -100);
        auto run = [&](bool fused) {
          return with_fused(dev, fused, [&] {
            at::Tensor hidden = hidden0.clone().requires_grad_(true), weight = weight0.clone().requires_grad_(true);
            at::Tensor bias = with_bias ? bias0.clone().requires_grad_(true) : at::Tensor();
            at::Tensor loss;
            {
              AutocastGuard autocast(dev, bf16);
              loss = models::linear_cross_entropy(hidden, weight, bias, targets, smoothing, 1000 * 128);  // 3 chunks
            }
            loss.backward();
            return std::vector<at::Tensor>{loss.detach(), hidden.grad(), weight.grad(),
                                           with_bias ? bias.grad() : at::zeros({1}, opts)};
          });
        };
        auto fused = run(true), composite = run(false);
        const double tol = bf16 ? 2e-2 : 1e-5;
        CHECK(fused[0].item<double>() == Approx(composite[0].item<double>()).epsilon(bf16 ? 1e-3 : 1e-6));
        for (size_t i = 1; i < fused.size(); ++i) {
          INFO("gradient " << i);
          CHECK(rel(fused[i], composite[i]) < tol);
        }
      }
    }
  }
}


// A norm whose output feeds a linear under bf16 autocast (a pre-norm sublayer's input): with
// feeds_linear the fused path writes y in bf16 itself, which must be the bits the linear's own
// cast of the float32 y gives, forward and backward, dropout included (the same draws).
void feeds_linear_parity(const c10::Device& dev) {
  at::manual_seed(16);
  const auto opts = at::TensorOptions().device(dev);
  for (nn::NormType type : {nn::NormType::kLayerNorm, nn::NormType::kRmsNorm}) {
    INFO("norm " << static_cast<int>(type));
    const int64_t d = 96;
    nn::Norm norm(nn::NormOptions(d).type(type));
    torch::nn::Linear layer(torch::nn::LinearOptions(d, 40));
    norm->to(dev), layer->to(dev);
    const at::Tensor x0 = at::randn({4, 25, d}, opts), h0 = at::randn({4, 25, d}, opts).to(at::kBFloat16);
    const at::Tensor gs = at::randn({4, 25, d}, opts), gout = at::randn({4, 25, 40}, opts);
    auto run = [&](bool feeds_linear, bool autocast_on) {
      return with_fused(dev, true, [&] {
        at::Tensor x = x0.clone().requires_grad_(true), h = h0.clone().requires_grad_(true);
        for (auto* m : {static_cast<torch::nn::Module*>(norm.get()), static_cast<torch::nn::Module*>(layer.get())}) {
          for (auto& q : m->parameters()) q.mutable_grad() = at::Tensor();
        }
        at::manual_seed(17);  // the dropout's draws
        at::Tensor s, y, out;
        {
          AutocastGuard autocast(dev, autocast_on);
          std::tie(s, y) = nn::residual_norm(x, h, 0.1, true, norm, feeds_linear);
          out = layer(y);
        }
        ((out.to(at::kFloat) * gout).sum() + (s * gs).sum()).backward();
        return std::vector<at::Tensor>{y.detach(), out.detach(), x.grad(), h.grad(), norm->weight.grad(),
                                       norm->bias.defined() ? norm->bias.grad() : at::zeros({1}, opts),
                                       layer->weight.grad(), layer->bias.grad()};
      });
    };
    const auto fed = run(true, true), plain = run(false, true);
    CHECK(fed[0].scalar_type() == at::kBFloat16);
    CHECK(plain[0].scalar_type() == at::kFloat);
    CHECK(at::equal(fed[0], plain[0].to(at::kBFloat16)));  // the cast the linear made
    const char* names[] = {"y", "out", "dx", "dh", "dw", "db", "dW", "dbias"};
    for (size_t i = 1; i < fed.size(); ++i) {
      INFO(names[i]);
      CHECK(fed[i].scalar_type() == plain[i].scalar_type());
      CHECK(at::equal(fed[i], plain[i]));  // bit for bit
    }
    CHECK(run(true, false)[0].scalar_type() == at::kFloat);  // no autocast: float32, as Norm returns it
  }
}

struct ModelStep {
  int fused_steps = 0;
  double loss = 0;
  std::vector<at::Tensor> grads;
};

// A training step of a small model (every dropout 0, so both paths draw nothing), with the
// device's fused path on or off.
ModelStep model_step(const Json& config, const std::string& architecture, bool encoder_decoder,
                     const c10::Device& dev, bool fused, bool bf16, bool cpu_path) {
  return with_fused(dev, fused, [&] {
    at::manual_seed(5);
    auto model = models::create_model(config, "tiny.json", architecture);
    model->to(dev);
    model->train();
    const Batch batch = test::tiny_training_batch(encoder_decoder).to(dev);
    at::Tensor loss;
    {
      AutocastGuard autocast(dev, bf16);
      loss = model->forward(batch).loss;
    }
    ModelStep step;
    step.fused_steps = test::graph_nodes(loss, "ResidualNormFunction");
    loss.backward();
    step.loss = loss.item<double>();
    for (const auto& p : model->parameters()) {
      step.grads.push_back(p.grad().defined() ? p.grad().to(at::kFloat) : at::zeros_like(p, at::kFloat));
    }
    return step;
  }, cpu_path);
}

// Pre-norm stacks on the fused path hand each layer's last residual sum to the next layer's
// first norm (and the last to the final norm): GPT-2 and Llama make 2 fused steps a layer
// (one inside, one joining it to the next norm), and every family's loss and gradients equal
// the composite's. With `cpu_path`, the residual step's CPU path (float32 only: under bf16
// autocast the CPU takes the composite).
void pending_sum_parity(const c10::Device& dev, bool cpu_path = false) {
  struct Family {
    Json config;
    std::string architecture;
    bool encoder_decoder;
    int fused_steps;  // on the fused path
  };
  const std::vector<Family> families = {
      {{{"model_type", "gpt2"}, {"vocab_size", 97}, {"n_embd", 32}, {"n_layer", 3}, {"n_head", 4},
        {"n_positions", 32}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}},
       "GPT2LMHeadModel", false, 6},
      {{{"model_type", "llama"}, {"vocab_size", 97}, {"hidden_size", 32}, {"num_hidden_layers", 3},
        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 64},
        {"max_position_embeddings", 32}},
       "LlamaForCausalLM", false, 6},
      {{{"model_type", "bloom"}, {"vocab_size", 97}, {"hidden_size", 32}, {"n_layer", 2}, {"n_head", 4},
        {"hidden_dropout", 0.0}, {"attention_dropout", 0.0}},
       "BloomForCausalLM", false, 4},
      // encoder 2 a layer, decoder 3 (its cross-attention's sum too)
      {{{"model_type", "t5"}, {"vocab_size", 97}, {"d_model", 32}, {"d_kv", 8}, {"d_ff", 64}, {"num_layers", 2},
        {"num_decoder_layers", 2}, {"num_heads", 4}, {"dropout_rate", 0.0}, {"decoder_start_token_id", 0}},
       "T5ForConditionalGeneration", true, 10},
  };
  for (const Family& f : families) {
    for (bool bf16 : {false, true}) {
      INFO(f.architecture << (bf16 ? ", bf16 autocast" : ", float32"));
      const ModelStep fused = model_step(f.config, f.architecture, f.encoder_decoder, dev, true, bf16, cpu_path);
      const ModelStep composite = model_step(f.config, f.architecture, f.encoder_decoder, dev, false, bf16, cpu_path);
      CHECK(fused.fused_steps == (cpu_path && bf16 ? 0 : f.fused_steps));
      CHECK(composite.fused_steps == 0);
      CHECK(fused.loss == Approx(composite.loss).epsilon(bf16 ? 1e-2 : 1e-5));
      REQUIRE(fused.grads.size() == composite.grads.size());
      double worst = 0;
      for (size_t i = 0; i < fused.grads.size(); ++i) worst = std::max(worst, rel(fused.grads[i], composite.grads[i]));
      CHECK(worst < (bf16 ? 5e-2 : 1e-4));
    }
  }
}

}  // namespace

TEST_CASE("cuda: fused residual + LayerNorm/RMSNorm equals the composite, forward and backward", "[cuda][fused]") {
  if (no_cuda()) return;
  residual_norm_parity(kGpu);
}

TEST_CASE("fused ops on the host: residual + LayerNorm/RMSNorm equals the composite, forward and backward",
          "[fused][host]") {
  residual_norm_parity(kHost);
}

TEST_CASE("cuda: fused residual dropout drops at its rate, replays its mask backward, and is deterministic",
          "[cuda][fused]") {
  if (no_cuda()) return;
  residual_dropout_replay(kGpu);
}

TEST_CASE("fused ops on the host: residual dropout drops at its rate, replays its mask backward, is deterministic",
          "[fused][host]") {
  residual_dropout_replay(kHost);
}

TEST_CASE("cuda: fused GELU backward with the bias gradient equals the composite", "[cuda][fused]") {
  if (no_cuda()) return;
  gelu_bias_parity(kGpu);
}

TEST_CASE("fused ops on the host: GELU backward with the bias gradient equals the composite", "[fused][host]") {
  gelu_bias_parity(kHost);
}

TEST_CASE("cuda: the fused LM-head softmax cross-entropy equals the composite chunked loss", "[cuda][fused]") {
  if (no_cuda()) return;
  cross_entropy_parity(kGpu);
}

TEST_CASE("fused ops on the host: the LM-head softmax cross-entropy equals the composite chunked loss",
          "[fused][host]") {
  cross_entropy_parity(kHost);
}

TEST_CASE("cuda: a fused norm feeding a linear under autocast writes y in bf16, the linear's own cast, bit for bit",
          "[cuda][fused]") {
  if (no_cuda()) return;
  feeds_linear_parity(kGpu);
}

TEST_CASE("fused ops on the host: a norm feeding a linear under autocast writes y in bf16, bit for bit",
          "[fused][host]") {
  feeds_linear_parity(kHost);
}

TEST_CASE("cuda: pre-norm stacks make each residual sum in the next norm's fused step, the composite's loss and gradients",
          "[cuda][fused]") {
  if (no_cuda()) return;
  pending_sum_parity(kGpu);
}

TEST_CASE("fused ops on the host: pre-norm stacks make each residual sum in the next norm's fused step",
          "[fused][host]") {
  pending_sum_parity(kHost);
}

TEST_CASE("fused ops on the host: a target outside the vocabulary gives a NaN loss, zero rows give empty outputs",
          "[fused][host]") {
  const bool before = nn::set_host_kernels_enabled(true);
  at::Tensor logits = at::randn({3, 64});
  const at::Tensor targets = at::tensor({int64_t{5}, int64_t{64}, int64_t{-7}});  // 64: one past the vocabulary
  const at::Tensor loss = nn::softmax_cross_entropy_(logits, targets, at::ones({3}), 64, 0.0);
  CHECK(std::isfinite(loss[0].item<double>()));
  CHECK(std::isnan(loss[1].item<double>()));
  CHECK(std::isnan(loss[2].item<double>()));
  nn::Norm norm{nn::NormOptions(8)};
  const at::Tensor x = at::randn({0, 8}, at::TensorOptions().requires_grad(true));
  auto [s, y] = nn::residual_norm(x, at::randn({0, 8}), 0.1, true, norm);
  CHECK(s.numel() == 0);
  y.sum().backward();
  CHECK(at::equal(norm->weight.grad(), at::zeros({8})));
  nn::set_host_kernels_enabled(before);
}

TEST_CASE("fused ops: the CPU takes the composite whatever the switch", "[nn][fused]") {
  const bool before = nn::set_fused_kernels_enabled(true);
  const bool cpu_before = nn::set_cpu_kernels_enabled(false);  // the residual step's own CPU path: below
  at::manual_seed(16);
  nn::Norm norm{nn::NormOptions(8)};
  const at::Tensor x = at::randn({2, 3, 8}), h = at::randn({2, 3, 8});
  auto [s, y] = nn::residual_norm(x, h, 0.0, true, norm);
  CHECK(at::equal(s, x + h));
  CHECK(at::equal(y, norm(x + h)));
  at::Tensor logits = at::randn({4, 64});
  CHECK_FALSE(nn::softmax_cross_entropy_applies(logits));
  torch::nn::Linear layer(torch::nn::LinearOptions(8, 16));
  CHECK(at::equal(nn::linear_gelu(layer, x, true), at::gelu(layer(x), "tanh")));
  nn::set_fused_kernels_enabled(before);
  nn::set_cpu_kernels_enabled(cpu_before);
  CHECK(nn::fused_kernels_enabled() == before);
}

namespace {

// The residual step under the CPU path (on) or the composite alone (off): {s, y, dx, dh, dw, db}
// and whether the step was the CPU path's (its autograd node in the graph).
std::pair<std::vector<at::Tensor>, bool> cpu_residual_step(bool on, nn::Norm& norm, const at::Tensor& x0,
                                                           const at::Tensor& h0, double p, bool training,
                                                           const at::Tensor& gs, const at::Tensor& gy) {
  return with_fused(kHost, on, [&] {
    at::Tensor x = x0.clone().requires_grad_(true), h = h0.clone().requires_grad_(true);
    for (auto& q : norm->parameters()) q.mutable_grad() = at::Tensor();
    auto [s, y] = nn::residual_norm(x, h, p, training, norm);
    const at::Tensor total = gs.defined() ? (s * gs).sum() + (y * gy).sum() : (y * gy).sum();
    const bool took = test::graph_nodes(total, "ResidualNormFunction") > 0;
    total.backward();
    std::vector<at::Tensor> out = {s.detach(), y.detach(), x.grad(), h.grad(), norm->weight.grad()};
    out.push_back(norm->bias.defined() ? norm->bias.grad() : at::Tensor());
    return std::make_pair(out, took);
  }, /*cpu_path=*/true);
}

}  // namespace

TEST_CASE("the residual step's CPU path equals the composite, forward and backward, without dropout", "[nn][fused]") {
  at::manual_seed(21);
  for (const nn::NormType type : {nn::NormType::kLayerNorm, nn::NormType::kRmsNorm}) {
    // under one SIMD block, a whole number of them, a tail, several slices of the column sums
    for (const auto& [rows, d] : std::vector<std::pair<int64_t, int64_t>>{{5, 7}, {37, 64}, {111, 257}, {700, 48}}) {
      for (const bool with_gs : {true, false}) {
        INFO((type == nn::NormType::kRmsNorm ? "RMSNorm" : "LayerNorm") << " rows " << rows << " d " << d
                                                                        << (with_gs ? ", dL/ds too" : ", y alone"));
        nn::Norm norm(nn::NormOptions(d).type(type).eps(1e-6));
        {
          at::NoGradGuard no_grad;
          norm->weight.copy_(at::randn({d}) * 0.5 + 1);
          if (norm->bias.defined()) norm->bias.copy_(at::randn({d}) * 0.1);
        }
        const at::Tensor x = at::randn({rows, d}) * 3, h = at::randn({rows, d});
        const at::Tensor gs = with_gs ? at::randn({rows, d}) : at::Tensor(), gy = at::randn({rows, d});
        const auto [cpu, took] = cpu_residual_step(true, norm, x, h, 0.0, true, gs, gy);
        const auto [composite, composite_took] = cpu_residual_step(false, norm, x, h, 0.0, true, gs, gy);
        CHECK(took);
        CHECK_FALSE(composite_took);
        CHECK(at::equal(cpu[0], composite[0]));  // s = x + h: one rounding either way
        const char* names[] = {"s", "y", "dx", "dh", "dw", "db"};
        for (size_t i = 1; i < cpu.size(); ++i) {
          INFO(names[i]);
          REQUIRE(cpu[i].defined() == composite[i].defined());
          if (!cpu[i].defined()) continue;
          CHECK(cpu[i].scalar_type() == at::kFloat);
          CHECK(rel(cpu[i], composite[i]) < (i >= 4 ? 1e-5 : 2e-6));
        }
      }
    }
  }
  SECTION("dropout in training is the composite's; without training it is no dropout") {
    nn::Norm norm(nn::NormOptions(16));
    const at::Tensor x = at::randn({4, 16}), h = at::randn({4, 16}), gy = at::randn({4, 16});
    CHECK_FALSE(cpu_residual_step(true, norm, x, h, 0.1, true, at::Tensor(), gy).second);
    CHECK(cpu_residual_step(true, norm, x, h, 0.1, false, at::Tensor(), gy).second);
    AutocastGuard autocast(kHost, true);  // bf16 autocast on the CPU: the composite
    CHECK_FALSE(cpu_residual_step(true, norm, x, h, 0.0, true, at::Tensor(), gy).second);
  }
}

TEST_CASE("the residual step's CPU path gives the same bits on 1 and 2 threads", "[nn][fused]") {
  at::manual_seed(22);
  const int threads = at::get_num_threads();
  nn::Norm norm(nn::NormOptions(96));
  const at::Tensor x = at::randn({1500, 96}), h = at::randn({1500, 96}), gs = at::randn({1500, 96});
  const at::Tensor gy = at::randn({1500, 96});
  std::vector<std::vector<at::Tensor>> runs;
  for (const int n : {1, 2}) {
    at::set_num_threads(n);
    runs.push_back(cpu_residual_step(true, norm, x, h, 0.0, true, gs, gy).first);
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < runs[0].size(); ++i) {
    INFO("output " << i);
    CHECK(at::equal(runs[0][i], runs[1][i]));
  }
}

TEST_CASE("the residual step's CPU path: pre-norm stacks make each sum in the next norm's step", "[nn][fused]") {
  pending_sum_parity(kHost, /*cpu_path=*/true);
}

TEST_CASE("rotary positions on the CPU path: the composite's bits, forward and backward, in one pass", "[nn][fused]") {
  at::manual_seed(23);
  const int64_t b = 3, heads = 4, t = 5, hd = 8;
  const at::Tensor positions = at::randint(0, 50, {b, t}, at::kLong);
  const std::vector<std::pair<at::Tensor, at::Tensor>> tables = {nn::rotary_cos_sin(7, t, hd, 10000.0, kHost),
                                                                 nn::rotary_cos_sin(positions, hd, 10000.0, kHost)};
  for (const auto& [cos, sin] : tables) {
    INFO("cos " << cos.sizes());
    // a view with heads strided, as attention's split heads give it
    const at::Tensor x0 = at::randn({b, t, heads, hd}), g = at::randn({b, heads, t, hd});
    auto run = [&](bool on) {
      return with_fused(kHost, on, [&] {
        const at::Tensor x = x0.clone().requires_grad_(true);
        const at::Tensor out = nn::apply_rotary(x.transpose(1, 2), cos, sin);
        const bool took = test::graph_nodes(out, "RotaryFunction") > 0;
        (out * g).sum().backward();
        return std::make_tuple(out.detach(), x.grad(), took);
      }, /*cpu_path=*/true);
    };
    const auto [out, grad, took] = run(true);
    const auto [composite_out, composite_grad, composite_took] = run(false);
    CHECK(took);
    CHECK_FALSE(composite_took);
    CHECK(at::equal(out, composite_out));
    CHECK(at::equal(grad, composite_grad));
  }
  SECTION("a table that takes gradients is the composite's") {
    auto [cos, sin] = nn::rotary_cos_sin(0, t, hd, 10000.0, kHost);
    cos.requires_grad_(true);
    CHECK_FALSE(nn::rotary_cpu(at::randn({b, heads, t, hd}), cos, sin).defined());
    CHECK(nn::rotary_cpu(at::randn({b, heads, t, hd}), cos.detach(), sin).defined());
  }
}

TEST_CASE("SwiGLU on the CPU path: within float32 roundings of silu(gate)*up, forward and backward", "[nn][fused]") {
  at::manual_seed(29);
  // A dense block, a tail that is not a whole vector, a strided view (as a sliced projection
  // gives it), and the exponential's edges: past its clamps, zero, infinities and NaN.
  at::Tensor edges = at::tensor({-1e4f, -100.0f, -88.0f, -87.0f, -20.0f, -1e-3f, 0.0f, 1e-3f, 20.0f, 88.0f, 89.0f, 100.0f,
                                 1e4f, std::numeric_limits<float>::infinity()});
  const std::vector<at::Tensor> gates = {at::randn({2, 37, 64}) * 4, at::randn({3, 7}), at::randn({5, 16}).t(),
                                         edges.reshape({2, 7})};
  for (const at::Tensor& gate0 : gates) {
    INFO("gate " << gate0.sizes() << (gate0.is_contiguous() ? "" : ", strided"));
    const at::Tensor up0 = at::randn(gate0.sizes()), dy = at::randn(gate0.sizes());
    auto run = [&](bool on) {
      return with_fused(kHost, on, [&] {
        const at::Tensor gate = gate0.clone().requires_grad_(true), up = up0.clone().requires_grad_(true);
        at::Tensor y = nn::swiglu_cpu(gate, up);
        const bool took = y.defined();
        if (!took) y = at::silu(gate) * up;
        (y * dy).sum().backward();
        return std::make_tuple(y.detach(), gate.grad(), up.grad(), took && test::graph_nodes(y, "SwigluFunction") > 0);
      }, /*cpu_path=*/true);
    };
    const auto [y, dgate, dup, took] = run(true);
    const auto [ref_y, ref_dgate, ref_dup, ref_took] = run(false);
    CHECK(took);
    CHECK_FALSE(ref_took);
    // Each element within a few roundings of its own size (not of the tensor's largest).
    auto close = [](const at::Tensor& a, const at::Tensor& b) {
      const at::Tensor finite = at::isfinite(b);
      CHECK(at::equal(at::isfinite(a), finite));
      const at::Tensor excess = (a - b).abs() - (b.abs() * 2e-6 + 1e-30);
      return at::where(finite, excess, at::zeros_like(excess)).max().item<double>();
    };
    CHECK(close(y, ref_y) <= 0);
    CHECK(close(dup, ref_dup) <= 0);
    // silu's derivative is a sum of two terms of opposite sign where gate < 0: a rounding of either term.
    const double largest = at::where(at::isfinite(ref_dgate), ref_dgate.abs(), 0.0).max().item<double>();
    CHECK(close(dgate, ref_dgate) <= 1e-6 * largest);
  }
  SECTION("NaN stays NaN; shapes that differ, other dtypes and autocast take the composite") {
    const at::Tensor nan = at::full({4}, std::numeric_limits<float>::quiet_NaN());
    CHECK(at::isnan(with_fused(kHost, true, [&] { return nn::swiglu_cpu(nan, at::ones({4})); }, true)).all().item<bool>());
    with_fused(kHost, true, [&] {
      CHECK_FALSE(nn::swiglu_cpu(at::randn({4, 3}), at::randn({4, 1})).defined());
      CHECK_FALSE(nn::swiglu_cpu(at::randn({4}, at::kDouble), at::randn({4}, at::kDouble)).defined());
      CHECK_FALSE(nn::swiglu_cpu(at::empty({0, 3}), at::empty({0, 3})).defined());
      return 0;
    }, true);
    CHECK_FALSE(with_fused(kHost, false, [&] { return nn::swiglu_cpu(at::randn({4}), at::randn({4})); }, true).defined());
  }
}
