// The chunked LM-head loss (models::linear_cross_entropy) against full logits and
// cross_entropy: loss and every gradient, across chunk boundaries.
#include <catch2/catch.hpp>

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "lmkit/core/autocast.h"
#include "lmkit/models/losses.h"
#include "test_util.h"

using lmkit::test::max_abs_diff;

namespace {

struct Case {
  at::Tensor hidden, weight, bias, targets;
};

Case make_case(bool with_bias, at::ScalarType dtype = at::kDouble) {
  at::manual_seed(21);
  auto opts = at::TensorOptions().dtype(dtype);
  Case c;
  c.hidden = at::randn({37, 12}, opts).requires_grad_(true);
  c.weight = (at::randn({50, 12}, opts) * 0.5).requires_grad_(true);
  if (with_bias) c.bias = at::randn({50}, opts).requires_grad_(true);
  c.targets = at::randint(0, 50, {37}, at::kLong);
  c.targets.index_put_({at::indexing::Slice(0, 37, 5)}, -100);  // some ignored rows, in several chunks
  return c;
}

std::vector<at::Tensor> grads(const at::Tensor& loss, const Case& c) {
  std::vector<at::Tensor> inputs = {c.hidden, c.weight};
  if (c.bias.defined()) inputs.push_back(c.bias);
  return torch::autograd::grad({loss}, inputs);
}

}  // namespace

TEST_CASE("losses: the chunked LM-head cross-entropy equals full logits + cross_entropy, gradients too",
          "[models][losses]") {
  for (bool with_bias : {false, true}) {
    for (double smoothing : {0.0, 0.1}) {
      for (int64_t chunk : {int64_t{1} << 26, int64_t{50 * 8}, int64_t{1}}) {  // one chunk, 5 chunks, a row each
        Case c = make_case(with_bias);
        at::Tensor full = lmkit::models::cross_entropy(at::linear(c.hidden, c.weight, c.bias), c.targets, smoothing);
        at::Tensor chunked = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, smoothing, chunk);
        INFO("bias " << with_bias << " smoothing " << smoothing << " chunk " << chunk);
        CHECK(chunked.item<double>() == Approx(full.item<double>()).epsilon(1e-12));
        auto a = grads(full * 3.0, c), b = grads(chunked * 3.0, c);  // backward scales by the incoming gradient
        // float64; 1e-12 held alone, but under ctest -j2's load the GEMMs' reduction order changes
        // with the threads they get, and 2e-10 was seen (of gradients near 0.1): 1e-9 of scale.
        for (size_t i = 0; i < a.size(); ++i) CHECK(max_abs_diff(a[i], b[i]) < 1e-9 * std::max(1.0, a[i].abs().max().item<double>()));
      }
    }
  }
}

TEST_CASE("losses: with no target at all the chunked loss is 0 with zero gradients, not NaN", "[models][losses]") {
  Case c = make_case(true);
  c.targets.fill_(-100);
  at::Tensor loss = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets);
  CHECK(loss.item<double>() == 0.0);
  for (const auto& g : grads(loss, c)) CHECK(g.abs().max().item<double>() == 0.0);
  CHECK(lmkit::models::cross_entropy(at::linear(c.hidden, c.weight, c.bias), c.targets).item<double>() == 0.0);
}

TEST_CASE("losses: under bf16 autocast the chunked loss follows the autocast reference", "[models][losses]") {
  Case c = make_case(true, at::kFloat);
  at::Tensor full, chunked;
  std::vector<at::Tensor> a, b;
  {
    lmkit::AutocastGuard autocast(at::kCPU, true);
    full = lmkit::models::cross_entropy(at::linear(c.hidden, c.weight, c.bias), c.targets);
    chunked = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, 0.0, 50 * 8);
  }
  a = grads(full, c), b = grads(chunked, c);
  CHECK(chunked.scalar_type() == at::kFloat);
  CHECK(chunked.item<double>() == Approx(full.item<double>()).epsilon(1e-2));
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(b[i].scalar_type() == at::kFloat);  // gradients in the parameters' dtype
    CHECK(max_abs_diff(a[i], b[i]) < 2e-2 * a[i].abs().max().item<double>() + 1e-4);
  }
}

TEST_CASE("losses: where nothing needs gradients (evaluation) the chunked loss is the training path's loss",
          "[models][losses]") {
  // Under NoGradGuard or InferenceMode linear_cross_entropy computes the loss alone, without the
  // two gradient products; the value is the training path's, to the bit (a validation loss and
  // a training loss of the same batch and weights are the same number).
  for (bool with_bias : {false, true}) {
    for (double smoothing : {0.0, 0.1}) {
      for (int64_t chunk : {int64_t{1} << 26, int64_t{50 * 8}, int64_t{1}}) {
        INFO("bias " << with_bias << " smoothing " << smoothing << " chunk " << chunk);
        Case c = make_case(with_bias);
        const double trained = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, smoothing, chunk)
                                   .item<double>();
        at::Tensor evaluated, inferred;
        {
          at::NoGradGuard no_grad;
          evaluated = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, smoothing, chunk);
        }
        {
          c10::InferenceMode inference;
          inferred = lmkit::models::linear_cross_entropy(c.hidden, c.weight, c.bias, c.targets, smoothing, chunk);
        }
        CHECK(evaluated.item<double>() == trained);
        CHECK(inferred.item<double>() == trained);
        CHECK_FALSE(evaluated.requires_grad());
        // Inputs that need no gradient under grad mode take the same path.
        const at::Tensor detached = lmkit::models::linear_cross_entropy(
            c.hidden.detach(), c.weight.detach(), c.bias.defined() ? c.bias.detach() : c.bias, c.targets, smoothing, chunk);
        CHECK(detached.item<double>() == trained);
      }
    }
  }
  Case none = make_case(true);
  none.targets.fill_(-100);
  at::NoGradGuard no_grad;
  CHECK(lmkit::models::linear_cross_entropy(none.hidden, none.weight, none.bias, none.targets).item<double>() == 0.0);
  Case f = make_case(true, at::kFloat);  // bf16 autocast: the training path's loss too
  lmkit::AutocastGuard autocast(at::kCPU, true);
  const at::Tensor full = lmkit::models::cross_entropy(at::linear(f.hidden, f.weight, f.bias), f.targets);
  const at::Tensor chunked = lmkit::models::linear_cross_entropy(f.hidden, f.weight, f.bias, f.targets, 0.0, 50 * 8);
  at::Tensor trained;
  {
    at::AutoGradMode grad_mode(true);
    trained = lmkit::models::linear_cross_entropy(f.hidden, f.weight, f.bias, f.targets, 0.0, 50 * 8);
  }
  CHECK(trained.requires_grad());
  CHECK(chunked.scalar_type() == at::kFloat);
  CHECK(chunked.item<double>() == trained.item<double>());
  CHECK(chunked.item<double>() == Approx(full.item<double>()).epsilon(1e-2));
}
