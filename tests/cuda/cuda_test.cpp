// Tests that need a CUDA device: each compares the GPU path with the CPU path it
// must agree with. Without a device they print "LMKIT_SKIP: ..." and CTest reports
// them as skipped (CMakeLists.txt), so a CPU-only run says what it did not check.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <cmath>
#include <iostream>
#include <utility>

#include "lmkit/core/autocast.h"
#include "lmkit/core/cuda.h"
#include "lmkit/eval/generation.h"
#include "lmkit/models/losses.h"
#include "lmkit/models/registry.h"
#include "lmkit/nn/attention.h"
#include "lmkit/train/step.h"
#include "test_util.h"

using namespace lmkit;

#define LMKIT_REQUIRE_CUDA()                                                   \
  do {                                                                         \
    if (!lmkit::cuda_available()) {                                        \
      std::cout << "LMKIT_SKIP: no CUDA device on this machine" << std::endl; \
      return;                                                                  \
    }                                                                          \
  } while (0)

namespace {

const c10::Device kCuda(c10::kCUDA, 0);

Json tiny(const std::string& family) {
  if (family == "bert-linformer") {  // layerwise: one projection every layer uses, moved to the GPU once
    Json j = tiny("bert");
    j["attention"] = "linformer";
    j["linformer_k"] = 8;
    j["linformer_sharing"] = "layerwise";
    return j;
  }
  if (family == "longformer" || family == "big_bird") {  // 16-token rows: a window of 2 either side; 8 blocks of 2
    Json j = tiny("bert");
    j["model_type"] = family;
    if (family == "longformer") j["attention_window"] = 4, j["pad_token_id"] = 1, j["max_position_embeddings"] = 34;
    if (family == "big_bird") j["block_size"] = 2, j["num_random_blocks"] = 1;
    return j;
  }
  if (family == "bert") {
    return {{"model_type", "bert"}, {"vocab_size", 120}, {"hidden_size", 32}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4}, {"intermediate_size", 64}, {"max_position_embeddings", 32},
            {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}};
  }
  return {{"model_type", "gpt2"}, {"vocab_size", 120}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4},
          {"n_positions", 32}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
}

Batch padded_batch(bool mlm) {
  Batch b;
  b.input_ids = at::randint(5, 120, {3, 16}, at::kLong);
  b.attention_mask = at::ones({3, 16}, at::kLong);
  b.attention_mask.index_put_({1, at::indexing::Slice(11)}, 0);
  b.labels = mlm ? at::where(at::rand({3, 16}).lt(0.3), b.input_ids, at::full_like(b.input_ids, -100))
                 : b.input_ids.masked_fill(b.attention_mask.eq(0), -100);
  b.labels.index_put_({0, 2}, 9);
  return b;
}

// Same weights, same batch: two AdamW steps on the CPU and on the GPU (TF32 off) agree.
// Unpadded, a GPT runs its causal attention in the kernel (flash where it applies).
void check_steps_agree(const std::string& family, const std::string& architecture, bool padded = true) {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::manual_seed(5);
  auto cpu = models::create_model(tiny(family), "tiny.json", architecture);
  auto gpu = models::create_model(tiny(family), "tiny.json", architecture);
  {
    at::NoGradGuard no_grad;
    auto a = cpu->parameters(), b = gpu->parameters();
    for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
  }
  gpu->to(kCuda);
  auto cpu_opt = train::make_adamw(*cpu, {1e-2}), gpu_opt = train::make_adamw(*gpu, {1e-2});
  Batch batch = padded_batch(family != "gpt2");
  if (family == "longformer") {  // two global tokens a row
    batch.extra[kGlobalAttentionMask] = at::zeros_like(batch.input_ids).index_fill_(1, at::tensor({0, 5}, at::kLong), 1);
  }
  if (family == "big_bird") {  // the same random blocks on both devices (a CUDA draw is not a CPU draw)
    batch.extra[kBigBirdRandomBlocks] = at::randint(1, 7, {2, 4, 6, 1}, at::kLong);
  }
  if (!padded) batch.attention_mask = at::Tensor(), batch.labels = batch.input_ids.clone();
  for (int step = 0; step < 2; ++step) {
    auto a = train::train_step(*cpu, *cpu_opt, {batch}, /*clip=*/0.5, false);
    auto b = train::train_step(*gpu, *gpu_opt, {batch.to(kCuda)}, 0.5, false);
    REQUIRE(a.finite);
    REQUIRE(b.finite);
    CHECK(b.loss == Approx(a.loss).epsilon(1e-5));
    CHECK(b.grad_norm == Approx(a.grad_norm).epsilon(1e-4));
  }
  auto a = cpu->parameters(), b = gpu->parameters();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, test::max_abs_diff(a[i], b[i].cpu()));
  INFO("largest weight difference after two steps: " << worst);
  // Adam divides by √v: a parameter whose gradient is ~0 turns a 1e-7 difference in its
  // gradient (GPU atomics, summation order) into up to ~1% of one update (lr 1e-2).
  CHECK(worst < 3e-4);
}

}  // namespace

TEST_CASE("cuda: a BERT MLM training step on the GPU matches the CPU step", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  check_steps_agree("bert", "BertForMaskedLM");
}

TEST_CASE("cuda: a Linformer BERT step (layerwise projection) on the GPU matches the CPU step", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  check_steps_agree("bert-linformer", "BertForMaskedLM");
}

TEST_CASE("cuda: a Longformer step (window, global tokens) and a BigBird step (block-sparse) match the CPU step",
          "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  check_steps_agree("longformer", "LongformerForMaskedLM");
  check_steps_agree("big_bird", "BigBirdForMaskedLM");
}

TEST_CASE("cuda: a GPT causal-LM training step on the GPU matches the CPU step", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  check_steps_agree("gpt2", "GPT2LMHeadModel");
}

TEST_CASE("cuda: an unpadded GPT step (causal attention in the kernel, chunked LM loss) matches the CPU step",
          "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  check_steps_agree("gpt2", "GPT2LMHeadModel", /*padded=*/false);
}

TEST_CASE("cuda: causal attention in the kernel (flash for bf16) equals the explicit causal bias, gradients too",
          "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  at::manual_seed(4);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    auto opts = at::TensorOptions().device(kCuda).dtype(dtype);
    at::Tensor q = at::randn({2, 4, 128, 64}, opts).requires_grad_(true);
    at::Tensor k = at::randn({2, 4, 128, 64}, opts).requires_grad_(true);
    at::Tensor v = at::randn({2, 4, 128, 64}, opts).requires_grad_(true);
    at::Tensor bias = nn::attention_bias({}, true, 128, 128, dtype, kCuda);
    at::Tensor explicit_ = nn::scaled_dot_product(q, k, v, bias, 0.125, 0, false, nn::AttentionBackend::kMath);
    at::Tensor kernel = nn::scaled_dot_product(q, k, v, {}, 0.125, 0, false, nn::AttentionBackend::kFused, nullptr, true);
    const double tol = dtype == at::kFloat ? 1e-5 : 3e-2;
    INFO("dtype " << dtype);
    CHECK(test::max_abs_diff(explicit_.to(at::kFloat), kernel.to(at::kFloat)) < tol);
    at::Tensor w = at::randn_like(kernel);
    auto a = torch::autograd::grad({(explicit_ * w).sum()}, {q, k, v});
    auto b = torch::autograd::grad({(kernel * w).sum()}, {q, k, v});
    for (size_t i = 0; i < 3; ++i) CHECK(test::max_abs_diff(a[i].to(at::kFloat), b[i].to(at::kFloat)) < 10 * tol);
  }
}

TEST_CASE("cuda: the chunked LM-head loss under bf16 autocast matches full logits on the GPU", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  at::manual_seed(6);
  auto opts = at::TensorOptions().device(kCuda);
  at::Tensor hidden = at::randn({700, 64}, opts).requires_grad_(true);
  at::Tensor weight = (at::randn({5000, 64}, opts) * 0.2).requires_grad_(true);
  at::Tensor targets = at::randint(0, 5000, {700}, opts.dtype(at::kLong));
  targets.index_put_({at::indexing::Slice(0, 700, 7)}, -100);
  at::Tensor full, chunked;
  {
    AutocastGuard autocast(kCuda, true);
    full = models::cross_entropy(at::linear(hidden, weight), targets);
    chunked = models::linear_cross_entropy(hidden, weight, {}, targets, 0.0, 5000 * 128);  // 6 chunks
  }
  CHECK(chunked.item<double>() == Approx(full.item<double>()).epsilon(5e-3));
  auto a = torch::autograd::grad({full}, {hidden, weight});
  auto b = torch::autograd::grad({chunked}, {hidden, weight});
  for (size_t i = 0; i < 2; ++i) {
    CHECK(b[i].scalar_type() == at::kFloat);
    CHECK(test::max_abs_diff(a[i], b[i]) < 2e-2 * a[i].abs().max().item<double>());
  }
}

TEST_CASE("cuda: fused attention equals the explicit path with padding and causal masks", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  at::manual_seed(3);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    auto opts = at::TensorOptions().device(kCuda).dtype(dtype);
    at::Tensor q = at::randn({2, 4, 24, 16}, opts), k = at::randn({2, 4, 24, 16}, opts), v = at::randn({2, 4, 24, 16}, opts);
    at::Tensor pad = at::ones({2, 24}, at::kLong);
    pad.index_put_({1, at::indexing::Slice(17)}, 0);
    for (bool causal : {false, true}) {
      at::Tensor bias = nn::attention_bias(pad, causal, 24, 24, dtype, kCuda);
      at::Tensor math = nn::scaled_dot_product(q, k, v, bias, 0.25, 0, false, nn::AttentionBackend::kMath);
      at::Tensor fused = nn::scaled_dot_product(q, k, v, bias, 0.25, 0, false, nn::AttentionBackend::kFused);
      INFO("dtype " << dtype << " causal " << causal);
      CHECK(test::max_abs_diff(math, fused) < (dtype == at::kFloat ? 1e-5 : 2e-2));
    }
    // No mask at all: the absent-mask path.
    at::Tensor math = nn::scaled_dot_product(q, k, v, {}, 0.25, 0, false, nn::AttentionBackend::kMath);
    at::Tensor fused = nn::scaled_dot_product(q, k, v, {}, 0.25, 0, false, nn::AttentionBackend::kFused);
    CHECK(test::max_abs_diff(math, fused) < (dtype == at::kFloat ? 1e-5 : 2e-2));
  }
}

TEST_CASE("cuda: bf16 autocast trains on the GPU with float32 master weights", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  at::manual_seed(1);
  auto model = models::create_model(tiny("gpt2"), "tiny.json", "GPT2LMHeadModel");
  model->to(kCuda);
  auto optimizer = train::make_adamw(*model, {1e-2});
  const Batch batch = padded_batch(false).to(kCuda);
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    auto r = train::train_step(*model, *optimizer, {batch}, 1.0, /*bf16=*/true);
    REQUIRE(r.finite);
    (i == 0 ? first : last) = r.loss;
  }
  CHECK(last < first - 1.0);
  for (const auto& p : model->parameters()) CHECK(p.scalar_type() == at::kFloat);
  CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCUDA));
}

TEST_CASE("cuda: greedy generation with the KV cache gives the CPU's tokens", "[cuda]") {
  LMKIT_REQUIRE_CUDA();
  at::globalContext().setAllowTF32CuBLAS(false);
  at::manual_seed(8);
  auto model = models::create_model(tiny("gpt2"), "tiny.json", "GPT2LMHeadModel");
  model->eval();
  const at::Tensor prompt = at::randint(5, 120, {2, 4}, at::kLong);
  eval::GenerationOptions o;
  o.max_new_tokens = 12;
  const auto on_cpu = eval::generate(*model, prompt, {}, o);
  model->to(kCuda);
  const auto on_gpu = eval::generate(*model, prompt.to(kCuda), {}, o);
  CHECK(on_cpu == on_gpu);
}

TEST_CASE("cuda: document-masked rows (block-diagonal bias, restarted positions) equal the CPU's", "[cuda][packing]") {
  LMKIT_REQUIRE_CUDA();
  for (const std::string family : {"gpt2", "bert"}) {
    INFO(family);
    at::manual_seed(5);
    auto model = models::create_model(tiny(family), family + ".json");
    model->eval();
    model->full_logits = true;
    Batch b;
    b.input_ids = at::randint(5, 120, {2, 24}, at::kLong);
    const at::Tensor docs = at::cat({at::zeros({2, 10}, at::kLong), at::ones({2, 6}, at::kLong), at::full({2, 8}, 2, at::kLong)}, 1);
    b.extra[kDocumentIds] = docs;
    b.extra[kPositionIds] = at::cat({at::arange(10), at::arange(6), at::arange(8)}).to(at::kLong).repeat({2, 1});
    b.labels = b.input_ids;
    const Output cpu = model->forward(b);
    model->to(kCuda);
    const Output gpu = model->forward(b.to(kCuda));
    CHECK((gpu.logits.cpu() - cpu.logits).abs().max().item<double>() < 1e-4);
    CHECK(std::abs(gpu.loss.item<double>() - cpu.loss.item<double>()) < 1e-5);
  }
}

TEST_CASE("cuda: packed documents in bf16 take the varlen flash kernel, equal to the block-diagonal bias", "[cuda][packing]") {
  LMKIT_REQUIRE_CUDA();
  at::manual_seed(21);
  const auto opts = at::TensorOptions().device(kCuda).dtype(at::kBFloat16);
  const int64_t b = 2, h = 4, t = 64, hd = 32;
  const at::Tensor ids = at::cat({at::zeros({b, 20}, at::kLong), at::ones({b, 30}, at::kLong), at::full({b, 14}, 2, at::kLong)}, 1);
  at::Tensor real = at::ones({b, t}, at::kLong);
  real[1].slice(0, 56).fill_(0);  // padding closes row 1
  const at::Tensor q0 = at::randn({b, h, t, hd}, opts), k0 = at::randn({b, h, t, hd}, opts), v0 = at::randn({b, h, t, hd}, opts);
  const at::Tensor g = at::randn({b, h, t, hd}, opts) * real.to(kCuda).view({b, 1, t, 1});  // real queries only
  for (const auto& [causal, window] : std::vector<std::pair<bool, int64_t>>{{false, 0}, {true, 0}, {true, 8}}) {
    INFO("causal " << causal << " window " << window);
    at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
    nn::AttentionMask mask = nn::document_mask(ids, real, causal, at::kBFloat16, kCuda, window);
    REQUIRE(mask.segment_offsets.defined());
    REQUIRE(nn::varlen_applies(q, k, mask));
    const at::Tensor out = nn::varlen_attention(q, k, v, mask, 1.0 / std::sqrt(double(hd)), 0.0, true, causal, window);
    (out.to(at::kFloat) * g).sum().backward();
    at::Tensor qr = q0.clone().requires_grad_(true), kr = k0.clone().requires_grad_(true), vr = v0.clone().requires_grad_(true);
    const at::Tensor ref = nn::scaled_dot_product(qr, kr, vr, mask.bias, 1.0 / std::sqrt(double(hd)), 0.0, true);
    (ref.to(at::kFloat) * g).sum().backward();
    const at::Tensor rows = real.to(kCuda).view({b, 1, t, 1}).to(at::kBool);
    auto close = [&](const at::Tensor& a, const at::Tensor& r) {
      const at::Tensor d = (a.to(at::kFloat) - r.to(at::kFloat)).abs().max();
      return d.item<double>() <= 2e-2 * std::max(1.0, r.to(at::kFloat).abs().max().item<double>());
    };
    CHECK(close(out.masked_fill(rows.logical_not(), 0), ref.masked_fill(rows.logical_not(), 0)));
    CHECK(close(q.grad(), qr.grad()));
    CHECK(close(k.grad(), kr.grad()));
    CHECK(close(v.grad(), vr.grad()));
  }
  // A model's packed rows under bf16 autocast go through it (its backward node in the graph).
  for (const std::string family : {"gpt2", "bert"}) {
    INFO(family);
    auto model = models::create_model(tiny(family), family + ".json");
    model->to(kCuda);
    model->train();
    Batch batch;
    batch.input_ids = at::randint(5, 120, {2, 24}, at::kLong);
    batch.extra[kDocumentIds] = at::cat({at::zeros({2, 10}, at::kLong), at::ones({2, 14}, at::kLong)}, 1);
    batch.extra[kPositionIds] = at::cat({at::arange(10), at::arange(14)}).to(at::kLong).repeat({2, 1});
    batch.labels = batch.input_ids;
    at::Tensor loss;
    {
      AutocastGuard autocast(kCuda, true);
      loss = model->forward(batch.to(kCuda)).loss;
    }
    CHECK(test::graph_nodes(loss, "FlashAttentionBackward0") > 0);
    loss.backward();
    CHECK(std::isfinite(loss.item<double>()));
  }
}
