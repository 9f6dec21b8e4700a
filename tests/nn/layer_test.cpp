#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/nn/attention.h"
#include "lmkit/nn/feed_forward.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"
#include "lmkit/nn/transformer_layer.h"
#include "test_util.h"

using namespace lmkit::nn;
using lmkit::test::max_abs_diff;

TEST_CASE("layer: an encoder layer without positions is permutation-equivariant", "[nn][layer]") {
  at::manual_seed(0);
  for (bool pre : {false, true}) {
    TransformerLayer layer(TransformerLayerOptions(32, 4, 64).pre_norm(pre));
    layer->eval();
    at::Tensor x = at::randn({2, 9, 32});
    at::Tensor perm = at::randperm(9, at::kLong);
    at::NoGradGuard ng;
    at::Tensor y = layer(x);
    at::Tensor y_perm = layer(x.index_select(1, perm));
    CHECK(max_abs_diff(y.index_select(1, perm), y_perm) < 1e-5);
  }
}

TEST_CASE("layer: every parameter receives a gradient", "[nn][layer]") {
  at::manual_seed(1);
  for (auto act : {Activation::kGelu, Activation::kRelu, Activation::kGatedGelu}) {
    for (bool pre : {false, true}) {
      TransformerLayer layer(TransformerLayerOptions(16, 2, 32)
                                 .activation(act)
                                 .pre_norm(pre)
                                 .cross_attention(true)
                                 .norm(pre ? NormType::kRmsNorm : NormType::kLayerNorm));
      at::Tensor x = at::randn({2, 5, 16}), mem = at::randn({2, 4, 16});
      RelativePositionBias rel(RelativePositionBiasOptions(2));
      at::Tensor bias = attention_bias({}, true, 5, 5, at::kFloat, at::kCPU) + rel(5, 5);
      layer(x, bias, mem).pow(2).sum().backward();
      int checked = 0;
      for (auto& p : layer->named_parameters()) {
        INFO(p.key());
        REQUIRE(p.value().grad().defined());
        CHECK(p.value().grad().abs().sum().item<double>() > 0);
        ++checked;
      }
      CHECK(checked == (pre ? 17 : 20));  // 14 linear weights and biases + 3 norms (RMS: weight only)
      CHECK(rel->embedding->weight.grad().abs().sum().item<double>() > 0);
    }
  }
}

TEST_CASE("layer: a decoder layer decodes incrementally as it runs in full", "[nn][layer]") {
  at::manual_seed(2);
  TransformerLayer layer(TransformerLayerOptions(16, 2, 32).pre_norm(true).cross_attention(true));
  layer->eval();
  at::Tensor x = at::randn({2, 6, 16}), mem = at::randn({2, 3, 16});
  at::NoGradGuard ng;
  at::Tensor full = layer(x, attention_bias({}, true, 6, 6, at::kFloat, at::kCPU), mem);
  LayerCache cache;
  for (int64_t t = 0; t < 6; ++t) {
    at::Tensor y = layer(x.slice(1, t, t + 1), attention_bias({}, true, 1, t + 1, at::kFloat, at::kCPU), mem, at::Tensor(), &cache);
    CHECK(max_abs_diff(y, full.slice(1, t, t + 1)) <= 1e-5);
  }
}

TEST_CASE("layer: post-norm and pre-norm follow their formulas", "[nn][layer]") {
  at::manual_seed(3);
  at::Tensor x = at::randn({1, 4, 8});
  at::NoGradGuard ng;
  for (bool pre : {false, true}) {
    TransformerLayer layer(TransformerLayerOptions(8, 2, 16).pre_norm(pre));
    layer->eval();
    at::Tensor expected;
    if (pre) {
      at::Tensor h = x + layer->self_attn(layer->self_attn_norm(x));
      expected = h + layer->ffn(layer->ffn_norm(h));
    } else {
      at::Tensor h = layer->self_attn_norm(x + layer->self_attn(x));
      expected = layer->ffn_norm(h + layer->ffn(h));
    }
    CHECK(max_abs_diff(layer(x), expected) == 0.0);
  }
}

TEST_CASE("norms: LayerNorm and RMSNorm equal their formulas in float32 even for bf16 inputs", "[nn][norm]") {
  at::manual_seed(4);
  at::Tensor x = at::randn({3, 10}) * 3 + 1;
  Norm ln(NormOptions(10).eps(1e-12));
  ln->weight.data().uniform_(0.5, 1.5);
  ln->bias.data().uniform_(-1, 1);
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor mean = xd.mean(-1, true), var = (xd - mean).pow(2).mean(-1, true);
  at::Tensor ln_ref = (xd - mean) / at::sqrt(var + 1e-12) * ln->weight.to(at::kDouble) + ln->bias.to(at::kDouble);
  CHECK(max_abs_diff(ln(x), ln_ref) < 1e-5);

  Norm rms(NormOptions(10).type(NormType::kRmsNorm).eps(1e-6));
  CHECK_FALSE(rms->bias.defined());
  rms->weight.data().uniform_(0.5, 1.5);
  at::Tensor rms_ref = xd / at::sqrt(xd.pow(2).mean(-1, true) + 1e-6) * rms->weight.to(at::kDouble);
  CHECK(max_abs_diff(rms(x), rms_ref) < 1e-5);

  at::Tensor y = ln(x.to(at::kBFloat16));
  CHECK(y.scalar_type() == at::kFloat);
  CHECK(max_abs_diff(y, ln_ref) < 0.1);
}

TEST_CASE("feed-forward: activations and the gated form", "[nn][ffn]") {
  at::manual_seed(5);
  at::Tensor x = at::randn({2, 3, 8});
  at::NoGradGuard ng;
  FeedForward gated(FeedForwardOptions(8, 12).activation(Activation::kGatedGelu).bias(false));
  CHECK(gated->in->weight.sizes() == at::IntArrayRef({24, 8}));
  at::Tensor w0 = gated->in->weight.slice(0, 0, 12), w1 = gated->in->weight.slice(0, 12);
  at::Tensor expected = at::matmul(at::gelu(at::matmul(x, w0.t()), "tanh") * at::matmul(x, w1.t()), gated->out->weight.t());
  CHECK(max_abs_diff(gated(x), expected) < 1e-6);

  // exact GELU and its tanh approximation differ; ReLU is max(0, x)
  at::Tensor z = at::linspace(-3, 3, 61);
  CHECK(max_abs_diff(activate(z, Activation::kGelu), activate(z, Activation::kGeluTanh)) > 1e-4);
  CHECK(max_abs_diff(activate(z, Activation::kGelu), 0.5 * z * (1 + at::erf(z / std::sqrt(2.0)))) < 1e-6);
  CHECK(max_abs_diff(activate(z, Activation::kRelu), z.clamp_min(0)) == 0.0);
  CHECK(parse_activation("gelu_new") == Activation::kGeluTanh);
  CHECK_THROWS_WITH(parse_activation("swish"), Catch::Contains("unknown activation 'swish'"));
}
