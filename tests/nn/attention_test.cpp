#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/functional.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/position.h"
#include "test_util.h"

using lmkit::nn::attention_bias;
using lmkit::nn::KVCache;
using lmkit::nn::MultiHeadAttention;
using lmkit::nn::MultiHeadAttentionOptions;
using lmkit::test::max_abs_diff;

namespace {

// Per-head float64 reference: softmax(Q_h K_hᵀ · scale + bias) V_h, written from the
// module's weights without any of its reshaping code.
at::Tensor reference(MultiHeadAttention& mha, const at::Tensor& x, const at::Tensor& bias, double scale) {
  const int64_t h = mha->options.num_heads(), hd = mha->head_dim(), inner = h * hd;
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor w = mha->qkv->weight.to(at::kDouble), b = mha->qkv->bias.to(at::kDouble);
  std::vector<at::Tensor> heads;
  for (int64_t i = 0; i < h; ++i) {
    auto proj = [&](int64_t which) {
      auto rows = at::arange(which * inner + i * hd, which * inner + (i + 1) * hd, at::kLong);
      return at::matmul(xd, w.index_select(0, rows).t()) + b.index_select(0, rows);  // (B, T, hd)
    };
    at::Tensor s = at::matmul(proj(0), proj(1).transpose(1, 2)) * scale;  // (B, T, T)
    if (bias.defined()) s = s + bias.to(at::kDouble).select(1, 0);
    heads.push_back(at::matmul(at::softmax(s, -1), proj(2)));
  }
  at::Tensor cat = at::cat(heads, -1);  // (B, T, inner)
  return at::matmul(cat, mha->out->weight.to(at::kDouble).t()) + mha->out->bias.to(at::kDouble);
}

MultiHeadAttention make(int64_t d, int64_t h, bool scale = true) {
  MultiHeadAttention m(MultiHeadAttentionOptions(d, h).scale_scores(scale));
  m->eval();
  return m;
}

}  // namespace

TEST_CASE("attention: equals a float64 per-head reference", "[nn][attention]") {
  at::manual_seed(0);
  for (bool scale : {true, false}) {
    auto mha = make(32, 4, scale);
    at::Tensor x = at::randn({2, 5, 32});
    at::Tensor mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, at::kLong).view({2, 5});
    at::Tensor bias = attention_bias(mask, false, 5, 5, at::kFloat, at::kCPU);
    const double s = scale ? 1.0 / std::sqrt(8.0) : 1.0;
    at::NoGradGuard ng;
    CHECK(max_abs_diff(mha(x, bias), reference(mha, x, bias, s)) < 1e-5);
    CHECK(max_abs_diff(mha(x), reference(mha, x, {}, s)) < 1e-5);
  }
}

TEST_CASE("attention: the math and fused kernels give the same numbers", "[nn][attention]") {
  at::manual_seed(1);
  at::Tensor q = at::randn({2, 3, 6, 8}), k = at::randn({2, 3, 7, 8}), v = at::randn({2, 3, 7, 8});
  at::Tensor mask = at::ones({2, 7}, at::kLong);
  mask[1].slice(0, 5).fill_(0);
  at::Tensor bias = attention_bias(mask, false, 6, 7, at::kFloat, at::kCPU) + at::randn({1, 3, 6, 7});
  for (double scale : {1.0 / std::sqrt(8.0), 1.0}) {
    at::Tensor math = lmkit::nn::scaled_dot_product(q, k, v, bias, scale, 0, false, lmkit::nn::AttentionBackend::kMath);
    at::Tensor fused = lmkit::nn::scaled_dot_product(q, k, v, bias, scale, 0, false, lmkit::nn::AttentionBackend::kFused);
    CHECK(max_abs_diff(math, fused) < 1e-5);
  }
}

TEST_CASE("attention: training dropout on the CPU drops the weights with lmkit's dropout, mask replayed backward",
          "[nn][attention]") {
  // LibTorch's attention kernel draws its dropout with the serial bernoulli_; on the CPU the
  // weights are dropped by nn::dropout instead: the same numbers as the composite written out
  // with it, the same for the same seed, and a gradient that uses the forward's mask.
  using lmkit::nn::AttentionBackend;
  at::manual_seed(3);
  const at::Tensor q0 = at::randn({2, 3, 9, 8}), k0 = at::randn({2, 3, 9, 8}), v0 = at::randn({2, 3, 9, 8});
  const double scale = 1.0 / std::sqrt(8.0), p = 0.4;
  for (const bool causal : {true, false}) {
    INFO("causal " << causal);
    auto run = [&](bool composite) {
      at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
      at::manual_seed(11);
      at::Tensor y;
      if (composite) {
        at::Tensor scores = at::matmul(q * scale, k.transpose(-2, -1));
        if (causal) scores = scores + attention_bias({}, true, 9, 9, at::kFloat, at::kCPU);
        y = at::matmul(lmkit::nn::dropout(at::softmax(scores, -1), p, true), v);
      } else {
        y = lmkit::nn::scaled_dot_product(q, k, v, {}, scale, p, true, AttentionBackend::kAuto, nullptr, causal);
      }
      const at::Tensor w = at::linspace(-1, 1, y.numel()).view(y.sizes());
      (y * w).sum().backward();
      return std::vector<at::Tensor>{y.detach(), q.grad(), k.grad(), v.grad()};
    };
    const auto kernel = run(false), composite = run(true), again = run(false);
    for (size_t i = 0; i < kernel.size(); ++i) {
      INFO("output " << i << " (y, dq, dk, dv)");
      CHECK(max_abs_diff(kernel[i], composite[i]) < 1e-6);
      CHECK(at::equal(kernel[i], again[i]));
    }
    at::NoGradGuard ng;  // and dropout did happen: not the undropped attention
    const at::Tensor eval = lmkit::nn::scaled_dot_product(q0, k0, v0, {}, scale, p, false, AttentionBackend::kAuto,
                                                          nullptr, causal);
    CHECK(max_abs_diff(kernel[0], eval) > 0.1);
  }
}

TEST_CASE("attention: padded keys get exactly zero weight and cannot leak", "[nn][attention]") {
  at::manual_seed(2);
  auto mha = make(16, 2);
  at::Tensor x = at::randn({2, 6, 16});
  at::Tensor mask = at::ones({2, 6}, at::kLong);
  mask[0].slice(0, 4).fill_(0);  // row 0: 4 real tokens, 2 padding
  at::Tensor bias = attention_bias(mask, false, 6, 6, at::kFloat, at::kCPU);

  at::NoGradGuard ng;
  auto qkv = mha->qkv(x).view({2, 6, 3, 2, 8}).permute({2, 0, 3, 1, 4});
  at::Tensor weights;
  lmkit::nn::scaled_dot_product(qkv[0], qkv[1], qkv[2], bias, 1 / std::sqrt(8.0), 0, false,
                                lmkit::nn::AttentionBackend::kAuto, &weights);
  CHECK(weights[0].slice(-1, 4).abs().max().item<float>() == 0.0f);
  CHECK(weights[1].min().item<float>() > 0.0f);

  at::Tensor y = mha(x, bias);
  at::Tensor x2 = x.clone();
  x2[0].slice(0, 4).normal_(0, 10);  // different garbage in the padding
  at::Tensor y2 = mha(x2, bias);
  CHECK(max_abs_diff(y[0].slice(0, 0, 4), y2[0].slice(0, 0, 4)) < 1e-6);
  CHECK(max_abs_diff(y[1], y2[1]) == 0.0);
}

TEST_CASE("attention: causal output at i does not depend on tokens after i", "[nn][attention]") {
  at::manual_seed(3);
  auto mha = make(16, 4);
  at::Tensor x = at::randn({1, 8, 16});
  at::Tensor bias = attention_bias({}, true, 8, 8, at::kFloat, at::kCPU);
  at::NoGradGuard ng;
  at::Tensor y = mha(x, bias);
  for (int64_t i = 0; i < 7; ++i) {
    at::Tensor x2 = x.clone();
    x2.slice(1, i + 1).normal_();
    at::Tensor y2 = mha(x2, bias);
    CHECK(max_abs_diff(y.slice(1, 0, i + 1), y2.slice(1, 0, i + 1)) < 1e-6);
    CHECK(max_abs_diff(y.slice(1, i + 1), y2.slice(1, i + 1)) > 1e-3);  // later positions do change
  }
}

TEST_CASE("attention: incremental decoding with the KV cache equals the full forward", "[nn][attention]") {
  at::manual_seed(4);
  auto self = make(24, 3);
  MultiHeadAttention cross(MultiHeadAttentionOptions(24, 3).cross_attention(true).memory_dim(12));
  cross->eval();
  at::Tensor x = at::randn({2, 7, 24}), memory = at::randn({2, 5, 12});
  at::Tensor mem_mask = at::ones({2, 5}, at::kLong);
  mem_mask[1][4] = 0;
  at::Tensor cross_bias = attention_bias(mem_mask, false, 1, 5, at::kFloat, at::kCPU);
  at::NoGradGuard ng;
  at::Tensor full_self = self(x, attention_bias({}, true, 7, 7, at::kFloat, at::kCPU));
  at::Tensor full_cross = cross(x, cross_bias, memory);
  KVCache self_cache, cross_cache;
  for (int64_t t = 0; t < 7; ++t) {
    at::Tensor xt = x.slice(1, t, t + 1);
    at::Tensor step_bias = attention_bias({}, true, 1, t + 1, at::kFloat, at::kCPU);
    CHECK(max_abs_diff(self(xt, step_bias, at::Tensor(), &self_cache), full_self.slice(1, t, t + 1)) <= 1e-5);
    CHECK(max_abs_diff(cross(xt, cross_bias, memory, &cross_cache), full_cross.slice(1, t, t + 1)) <= 1e-5);
  }
  CHECK(self_cache.length() == 7);
  CHECK(cross_cache.length() == 5);
}

TEST_CASE("attention: bias combines padding and causal masks without overflow", "[nn][attention]") {
  at::Tensor mask = at::tensor({1, 1, 0}, at::kLong).view({1, 3});
  at::Tensor b = attention_bias(mask, true, 3, 3, at::kFloat, at::kCPU);  // (1, 1, 3, 3)
  const float lo = std::numeric_limits<float>::lowest();
  at::Tensor expected = at::tensor({0.f, lo, lo, 0.f, 0.f, lo, 0.f, 0.f, lo}).view({1, 1, 3, 3});
  CHECK(at::equal(b, expected));
  CHECK_FALSE(attention_bias({}, false, 3, 3, at::kFloat, at::kCPU).defined());
  // Cached decoding: the one new query sits at the last position and sees every key.
  CHECK(attention_bias({}, true, 1, 4, at::kFloat, at::kCPU).eq(0).all().item<bool>());
}

TEST_CASE("attention: head_dim may differ from embed_dim / num_heads (T5 d_kv)", "[nn][attention]") {
  MultiHeadAttention m(MultiHeadAttentionOptions(16, 2).head_dim(12).bias(false));
  CHECK(m->qkv->weight.sizes() == at::IntArrayRef({72, 16}));
  CHECK(m->out->weight.sizes() == at::IntArrayRef({16, 24}));
  CHECK_FALSE(m->qkv->bias.defined());
  CHECK(m(at::randn({2, 3, 16})).sizes() == at::IntArrayRef({2, 3, 16}));
  CHECK_THROWS_WITH(MultiHeadAttention(MultiHeadAttentionOptions(10, 3)), Catch::Contains("not divisible"));
}

TEST_CASE("attention: a causal layer without a bias masks in the kernel, as the explicit causal bias does",
          "[nn][attention]") {
  at::manual_seed(12);
  // Nothing but the causal mask: attention_bias leaves it to the kernel.
  CHECK_FALSE(attention_bias({}, true, 8, 8, at::kFloat, at::kCPU, true).defined());
  CHECK(attention_bias({}, true, 8, 8, at::kFloat, at::kCPU).defined());
  CHECK(attention_bias({}, true, 1, 8, at::kFloat, at::kCPU, true).defined());          // a cached prefix
  CHECK(attention_bias(at::ones({2, 8}, at::kLong), true, 8, 8, at::kFloat, at::kCPU, true).defined());  // padding
  for (auto backend : {lmkit::nn::AttentionBackend::kFused, lmkit::nn::AttentionBackend::kMath}) {
    MultiHeadAttention causal(MultiHeadAttentionOptions(16, 4).causal(true).backend(backend));
    MultiHeadAttention plain(MultiHeadAttentionOptions(16, 4).backend(backend));
    causal->eval(), plain->eval();
    {
      at::NoGradGuard ng;
      auto a = causal->parameters(), b = plain->parameters();
      for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
    }
    at::Tensor x = at::randn({2, 9, 16}).requires_grad_(true);
    at::Tensor y_kernel = causal(x);
    at::Tensor y_bias = plain(x, attention_bias({}, true, 9, 9, at::kFloat, at::kCPU));
    CHECK(max_abs_diff(y_kernel, y_bias) < 1e-6);
    at::Tensor reference_out = reference(plain, x.detach(), attention_bias({}, true, 9, 9, at::kFloat, at::kCPU), 0.5);
    CHECK(max_abs_diff(y_kernel.to(at::kDouble), reference_out) < 1e-5);
    auto gx_kernel = torch::autograd::grad({y_kernel.square().sum()}, {x})[0];
    auto gx_bias = torch::autograd::grad({y_bias.square().sum()}, {x})[0];
    CHECK(max_abs_diff(gx_kernel, gx_bias) < 1e-5);
    // With a cached prefix the layer builds the causal bias itself.
    KVCache cache;
    at::NoGradGuard ng;
    at::Tensor first = causal->forward(x.detach().slice(1, 0, 5), {}, {}, &cache);
    at::Tensor rest = causal->forward(x.detach().slice(1, 5), {}, {}, &cache);
    CHECK(max_abs_diff(at::cat({first, rest}, 1), y_kernel.detach()) < 1e-5);
  }
}

TEST_CASE("attention: the banded sliding window equals full attention with the window's mask", "[nn][attention]") {
  at::manual_seed(3);
  // T from under one window to several, not a multiple of it; the second row right-padded.
  for (int64_t window : {1, 3, 4, 8}) {
    for (int64_t t : {2, 4, 5, 11, 16, 23}) {
      const at::Tensor q = at::randn({2, 3, t, 8}, at::kDouble), k = at::randn({2, 3, t, 8}, at::kDouble);
      const at::Tensor v = at::randn({2, 3, t, 8}, at::kDouble);
      at::Tensor mask = at::ones({2, t}, at::kLong);
      mask[1].slice(0, t - t / 3).fill_(0);
      const at::Tensor bias = attention_bias(mask, true, t, t, at::kDouble, q.device(), false, window);
      const at::Tensor want = lmkit::nn::scaled_dot_product(q, k, v, bias, 0.3, 0.0, false);
      const at::Tensor got = lmkit::nn::sliding_window_attention(q, k, v, mask, window, 0.3, 0.0, false);
      // Queries that see no key (padding past a window of padding) are undefined in both.
      const at::Tensor sees = bias.eq(0).any(-1, true);  // (B, 1, T, 1)
      CAPTURE(window, t);
      CHECK(max_abs_diff(got * sees, want * sees) < 1e-12);
    }
  }
}

TEST_CASE("attention: the band's blocks, and where they cost fewer scores than the masked product", "[nn][attention]") {
  // Mistral's window 64: blocks of 63 queries against 126 keys; at T = 128 that is 3 blocks,
  // 23,814 scores against 16,384 (the masked product runs), at T = 512 9 blocks, 71,442 against 262,144.
  const lmkit::nn::Band short_input(128, 63, 0), long_input(512, 63, 0);
  CHECK((short_input.s == 63 && short_input.n == 3 && short_input.nk == 126 && short_input.scores() == 23814));
  CHECK(long_input.scores() == 71442);
  // Longformer's symmetric band: blocks of w queries against 3w keys.
  const lmkit::nn::Band symmetric(100, 8, 8);
  CHECK((symmetric.s == 8 && symmetric.n == 13 && symmetric.lo == 1 && symmetric.hi == 1 && symmetric.nk == 24));
}

TEST_CASE("attention: a window bias masks keys window or more positions back, cached ones too", "[nn][attention]") {
  // 2 queries after 3 held keys (positions 3, 4 of keys 0..4), window 2: each sees itself and the one before.
  const at::Tensor bias = attention_bias({}, true, 2, 5, at::kFloat, at::kCPU, false, 2);
  const at::Tensor seen = bias.eq(0).view({2, 5}).to(at::kLong);
  CHECK(at::equal(seen, at::tensor({0, 0, 1, 1, 0, 0, 0, 0, 1, 1}, at::kLong).view({2, 5})));
  CHECK_FALSE(attention_bias({}, true, 5, 5, at::kFloat, at::kCPU, true, 5).defined());  // the window holds all: causal only
  KVCache cache;
  cache.key = at::arange(6, at::kFloat).view({1, 1, 6, 1}), cache.value = cache.key.clone();
  cache.keep_last(4);
  CHECK(cache.length() == 4);
  CHECK(cache.position() == 6);
  CHECK(cache.key.view({4})[0].item<float>() == 2);
}

TEST_CASE("attention: the KV cache appends into one growing buffer when nothing records gradients, as concatenation",
          "[nn][attention]") {
  at::manual_seed(12);
  c10::InferenceMode generating;  // as eval::generate runs
  KVCache cache;
  at::Tensor all_k, all_v;  // the same keys and values concatenated
  auto step = [&](int64_t t) {
    const at::Tensor k = at::randn({2, 3, t, 4}), v = at::randn({2, 3, t, 4});
    const at::Tensor earlier = cache.key, kept = earlier.defined() ? earlier.clone() : at::Tensor();
    cache.append(k, v);
    all_k = all_k.defined() ? at::cat({all_k, k}, 2) : k, all_v = all_v.defined() ? at::cat({all_v, v}, 2) : v;
    CHECK(at::equal(cache.key, all_k));
    CHECK(at::equal(cache.value, all_v));
    if (earlier.defined()) CHECK(at::equal(earlier, kept));  // a view handed out before is never written into
    return earlier;
  };
  step(5);  // a prompt
  int64_t shared = 0;
  for (int i = 0; i < 100; ++i) {
    const at::Tensor earlier = step(1);
    shared += cache.key.is_alias_of(earlier);
  }
  CHECK(shared >= 95);  // 100 appends, a handful of new buffers (64 positions, then doubled)
  // Beam search replaces the cache with reordered rows: appends go on from those.
  const at::Tensor order = at::tensor({1, 0}, at::kLong);
  cache.key = cache.key.index_select(0, order), cache.value = cache.value.index_select(0, order);
  all_k = all_k.index_select(0, order), all_v = all_v.index_select(0, order);
  for (int i = 0; i < 3; ++i) step(2);
  // A sliding window's rolling cache: the last 7 kept, then more appended after them.
  cache.keep_last(7);
  all_k = all_k.slice(2, -7), all_v = all_v.slice(2, -7);
  for (int i = 0; i < 40; ++i) {
    step(1);
    cache.keep_last(7);
    all_k = all_k.slice(2, -7), all_v = all_v.slice(2, -7);
  }
  CHECK(cache.position() == 5 + 100 + 6 + 40);
  // Two copies of one cache (they share its buffer) each append their own continuation.
  KVCache other = cache;
  const at::Tensor a = at::randn({2, 3, 1, 4}), b = at::randn({2, 3, 1, 4});
  cache.append(a, a);
  other.append(b, b);
  CHECK(at::equal(cache.key, at::cat({all_k, a}, 2)));
  CHECK(at::equal(other.key, at::cat({all_k, b}, 2)));
}

TEST_CASE("attention: the KV cache under autograd appends new tensors, so backward sees what the forward saw",
          "[nn][attention]") {
  at::manual_seed(13);
  KVCache cache;
  const at::Tensor k1 = at::randn({1, 2, 3, 4}).requires_grad_(), k2 = at::randn({1, 2, 1, 4}).requires_grad_();
  cache.append(k1, k1 * 2);
  const at::Tensor first = cache.key;
  cache.append(k2, k2 * 2);
  CHECK_FALSE(cache.key.is_alias_of(first));
  (first.sum() + cache.key.pow(2).sum() + cache.value.sum()).backward();
  CHECK(at::allclose(k1.grad(), 1 + 2 * k1 + 2));
  CHECK(at::allclose(k2.grad(), 2 * k2 + 2));
}

TEST_CASE("attention: Llama's attention is the one module: rotary, grouped-query heads fused or separate, a window",
          "[nn][attention]") {
  at::manual_seed(11);
  const int64_t d = 16, h = 4, kv = 2, hd = 4, t = 9, window = 4;
  auto options = [&](bool separate) {
    return MultiHeadAttentionOptions(d, h).kv_heads(kv).separate_qkv(separate).causal(true).window(window);
  };
  MultiHeadAttention separate(options(true)), fused(options(false));
  {  // the same weights: qkv is q, k, v stacked
    at::NoGradGuard ng;
    fused->qkv->weight.copy_(at::cat({separate->q->weight, separate->k->weight, separate->v->weight}));
    fused->qkv->bias.copy_(at::cat({separate->q->bias, separate->k->bias, separate->v->bias}));
    fused->out->weight.copy_(separate->out->weight), fused->out->bias.copy_(separate->out->bias);
  }
  CHECK(separate->k->weight.size(0) == kv * hd);
  CHECK(fused->qkv->weight.size(0) == (h + 2 * kv) * hd);
  const at::Tensor x = at::randn({2, t, d});
  const auto [cos, sin] = lmkit::nn::rotary_cos_sin(0, t, hd, 10000.0, x.device());
  const lmkit::nn::Rotary rotary{cos, sin};
  at::NoGradGuard ng;
  const at::Tensor y = separate->forward(x, {}, {}, nullptr, rotary);  // T > window: the banded path
  CHECK(max_abs_diff(fused->forward(x, {}, {}, nullptr, rotary), y) < 1e-6);

  // Written out: rotate, repeat each key/value head for its query heads, mask causally within the window.
  auto heads_of = [&](torch::nn::Linear l, int64_t n) { return l(x).view({2, t, n, hd}).transpose(1, 2); };
  const at::Tensor q = lmkit::nn::apply_rotary(heads_of(separate->q, h), cos, sin);
  const at::Tensor k = lmkit::nn::apply_rotary(heads_of(separate->k, kv), cos, sin).repeat_interleave(h / kv, 1);
  const at::Tensor v = heads_of(separate->v, kv).repeat_interleave(h / kv, 1);
  const at::Tensor bias = attention_bias({}, true, t, t, at::kFloat, x.device(), false, window);
  const at::Tensor heads = at::softmax(at::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd)) + bias, -1).matmul(v);
  CHECK(max_abs_diff(separate->out(heads.transpose(1, 2).reshape({2, t, h * hd})), y) < 1e-5);

  // One position at a time through the cache, which keeps the last window − 1 keys.
  KVCache cache;
  std::vector<at::Tensor> steps;
  for (int64_t i = 0; i < t; ++i) {
    const auto [c, s] = lmkit::nn::rotary_cos_sin(i, 1, hd, 10000.0, x.device());
    const at::Tensor held = attention_bias({}, true, 1, cache.length() + 1, at::kFloat, x.device(), false, window);
    steps.push_back(fused->forward(x.slice(1, i, i + 1), held, {}, &cache, {c, s}));
    CHECK(cache.length() == std::min<int64_t>(i + 1, window - 1));
    CHECK(cache.key.size(1) == kv);  // the cache holds the key/value heads, not their repeats
  }
  CHECK(max_abs_diff(at::cat(steps, 1), y) < 1e-5);

  // What the module cannot be is refused by name at construction.
  auto refused = [&](MultiHeadAttentionOptions o, const std::string& why) {
    CHECK_THROWS_WITH(MultiHeadAttention(o), Catch::Contains(why));
  };
  refused(MultiHeadAttentionOptions(d, h).causal(true).window(4).attention("relative"), "attention 'relative' cannot take a sliding window");
  refused(MultiHeadAttentionOptions(d, h).window(4), "a sliding window is for causal self-attention");
  refused(MultiHeadAttentionOptions(d, h).kv_heads(3), "num_heads 4 is not a multiple of kv_heads 3");
  refused(MultiHeadAttentionOptions(d, h).cross_attention(true).kv_heads(2), "are for self-attention");
  refused(MultiHeadAttentionOptions(d, h).kv_heads(2).qkv_per_head(true), "grouped by head");
}
