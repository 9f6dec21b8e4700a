#include "lmkit/train/step.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <torch/cuda.h>

#include "lmkit/core/autocast.h"
#include "lmkit/core/error.h"
#include "lmkit/train/sharded.h"

namespace lmkit::train {

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// The step's share of this micro-batch's loss: each term's mean × its targets here / its
// targets over the step (`targets` null: the only batch, every share 1). A term without
// targets here would be 0/0: it contributes nothing. Undefined when nothing does.
at::Tensor weighted_loss(const Output& out, const std::vector<std::pair<std::string, int64_t>>* targets,
                         const std::vector<double>& totals) {
  if (out.terms.empty()) {
    if (!targets) return out.loss;
    const double here = static_cast<double>(targets->front().second);
    if (here == 0) return {};
    return here == totals.front() ? out.loss : out.loss * (here / totals.front());
  }
  at::Tensor loss;
  for (size_t k = 0; k < out.terms.size(); ++k) {
    const LossTerm& term = out.terms[k];
    at::Tensor part = term.mean;
    if (targets) {
      size_t j = 0;
      while (j < targets->size() && (*targets)[j].first != term.name) ++j;
      if (j == targets->size()) throw RuntimeError("loss term '" + term.name + "' is not among the model's loss_targets()");
      const double here = static_cast<double>((*targets)[j].second);
      if (here == 0) continue;
      part = part * (here / totals[j]);
    }
    loss = loss.defined() ? loss + part : part;
  }
  return loss;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_adamw(torch::nn::Module& model, OptimizerOptions options) {
  options.name = "adamw";
  return make_optimizer(model, std::move(options));
}

namespace {

using Targets = std::vector<std::pair<std::string, int64_t>>;

// What train_step's parts share: the step's settings and where its time goes.
struct StepContext {
  models::Model& model;
  dist::GradientReducer* reducer;
  ShardedOptimizer* sharded;  ///< with its parameter all-gather overlapped with the first forward, if it says so
  bool bf16, time_parts;
  StepResult& r;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  // With time_parts, each part ends when the device has finished it (a CUDA sync), not when
  // its kernels were queued; otherwise the host never waits before the gradient norm.
  void part_done(const at::Tensor& on) const {
    if (time_parts && on.defined() && on.is_cuda()) torch::cuda::synchronize(on.device().index());
  }
  double lap() {
    const double ms = elapsed_ms(t0);
    t0 = std::chrono::steady_clock::now();
    return ms;
  }
};

// Each loss term's targets per micro-batch, and their totals over the step (all ranks):
// a term is weighted by its share, so accumulation and data parallelism train as one batch.
std::vector<double> count_targets(StepContext& c, const std::vector<Batch>& batches, std::vector<Targets>& targets) {
  std::vector<double> totals;
  for (const Batch& b : batches) {
    targets.push_back(c.model.loss_targets(b));
    totals.resize(targets.back().size(), 0.0);
    for (size_t k = 0; k < totals.size(); ++k) totals[k] += static_cast<double>(targets.back()[k].second);
  }
  return c.reducer ? c.reducer->sum(totals) : totals;
}

// Forward and backward over the micro-batches. Returns the summed loss on the device
// (one process; read later with the gradient norm) or adds it to r.loss (data-parallel).
at::Tensor accumulate_gradients(StepContext& c, const std::vector<Batch>& batches, bool& finite) {
  // One batch in one process: every share is 1, so skip counting (a device sync per step).
  const bool alone = !c.reducer && batches.size() == 1;
  std::vector<Targets> targets;
  const std::vector<double> totals = alone ? std::vector<double>() : count_targets(c, batches, targets);
  at::Tensor loss_sum;
  // A sharded optimizer's parameter all-gather starts now, after the step's other collectives,
  // on every rank (one without data too), and each layer of the first forward waits for its own.
  if (c.sharded) c.sharded->begin_forward();
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    // Stage 2 reduces each micro-batch once it has ended, on every rank (one without data too).
    if (c.reducer && i > 0) c.reducer->end_micro_batch();
    if (c.reducer) c.reducer->before_backward(i + 1 == batches.size());
    if (b.rows() == 0) continue;  // nothing of this step's data on this rank
    c.r.tokens += b.num_tokens();
    if (!b.input_ids.defined()) c.r.images += b.rows();
    at::Tensor loss;
    {
      AutocastGuard autocast(b.input_ids.defined() ? b.input_ids.device() : b.field(kPixelValues).device(), c.bf16);
      loss = weighted_loss(c.model.forward(b), alone ? nullptr : &targets[i], totals);
    }
    if (c.sharded) c.sharded->end_forward();  // backward reads every parameter
    if (!loss.defined()) continue;
    c.part_done(loss);
    c.r.forward_ms += c.lap();
    if (c.reducer) {
      // Data-parallel: every rank must still join the all-reduce after a non-finite loss;
      // the flag it carries makes every rank skip this update together.
      const double value = loss.item<double>();
      if (!std::isfinite(value)) finite = false;
      c.r.loss += value;
    } else {
      // Alone, a non-finite loss makes the norm non-finite too, which skips the update below.
      at::Tensor value = loss.detach().to(at::kFloat);
      loss_sum = loss_sum.defined() ? loss_sum + value : value;
    }
    c.lap();
    loss.backward();
    c.part_done(loss);
    c.r.backward_ms += c.lap();
  }
  if (c.sharded) c.sharded->end_forward();  // no forward ran on this rank
  return loss_sum;
}

// The global gradient norm in one multi-tensor pass, read with the loss in one device sync.
void read_loss_and_norm(const std::vector<at::Tensor>& grads, const at::Tensor& loss_sum, StepResult& r) {
  at::Tensor norm = grads.empty() ? at::Tensor() : at::stack(at::_foreach_norm(grads, 2)).to(at::kFloat).norm();
  std::vector<at::Tensor> read;
  if (loss_sum.defined()) read.push_back(loss_sum);
  if (norm.defined()) read.push_back(loss_sum.defined() ? norm.to(loss_sum.device()) : norm);
  if (read.empty()) return;
  const at::Tensor host = at::stack(read).cpu();  // the one wait for the device
  if (loss_sum.defined()) r.loss = host[0].item<double>();
  if (norm.defined()) r.grad_norm = host[static_cast<int64_t>(read.size()) - 1].item<double>();
}

// Clipping as torch::nn::utils::clip_grad_norm_; the fused AdamW folds the multiply into its update.
void clip_gradients(models::Model& model, torch::optim::Optimizer& optimizer, double clip, double grad_norm) {
  const double coef = clip > 0 ? clip / (grad_norm + 1e-6) : 1.0;
  if (coef >= 1.0) return;
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(&optimizer)) {
    sharded->scale_gradients(coef);
    return;
  }
  if (auto* fused = dynamic_cast<FusedAdamW*>(&optimizer)) {
    fused->set_grad_scale(coef);
    return;
  }
  at::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    if (p.grad().defined()) p.grad().mul_(coef);
  }
}

// --dtype bf16-weights: while it lives, every float32 parameter holds its bf16 rounding
// (set_data keeps the parameter, so the optimizer's state and the autograd leaves stay
// its own); restore() puts the float32 master values back, with the gradients in float32.
class Bf16Weights {
 public:
  Bf16Weights(models::Model& model, bool on) {
    if (!on) return;
    at::NoGradGuard no_grad;
    for (auto& p : model.parameters()) {
      if (p.scalar_type() != at::kFloat) continue;
      params_.push_back(p);
      masters_.push_back(p.data());
      p.set_data(p.data().to(at::kBFloat16));
    }
  }
  ~Bf16Weights() { restore(); }
  void restore() {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor grad = params_[i].grad();
      params_[i].set_data(masters_[i]);
      if (grad.defined()) params_[i].mutable_grad() = grad.to(at::kFloat);
    }
    params_.clear(), masters_.clear();
  }

 private:
  std::vector<at::Tensor> params_, masters_;
};

}  // namespace

Precision parse_precision(const std::string& name, const std::string& flag) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "bf16-weights") return Precision::kBf16Weights;
  throw InputError(flag + " '" + name + "': expected fp32, bf16 or bf16-weights");
}

StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      double clip, Precision precision, dist::GradientReducer* reducer, bool time_parts, bool stop) {
  StepResult r;
  r.stop = stop;
  StepContext c{model, reducer, dynamic_cast<ShardedOptimizer*>(&optimizer), precision != Precision::kFp32, time_parts, r};
  model.zero_grad(/*set_to_none=*/true);  // backward then hands its buffers over: no zeroing, no add
  bool finite = true;
  at::Tensor loss_sum;
  {
    // With a sharded optimizer's all-gather overlapped with the forward, the gathered values land
    // in the parameters' bf16 copies as each layer's gate waits for them (the cast Bf16Weights
    // would make); the masters hold this rank's own pieces, the ones its optimizer updates, and
    // get the others at settle() (validation, checkpoints): the same bits as gathering first
    // (CTest "distributed: bf16-weights").
    Bf16Weights weights(model, precision == Precision::kBf16Weights);
    loss_sum = accumulate_gradients(c, batches, finite);
  }
  if (reducer) {
    const auto summed = reducer->finish({r.loss, finite ? 0.0 : 1.0, static_cast<double>(r.tokens), stop ? 1.0 : 0.0,
                                         static_cast<double>(r.images)});
    r.loss = summed[0];
    finite = summed[1] == 0;
    r.tokens = static_cast<int64_t>(summed[2]);
    r.stop = summed[3] > 0;
    r.images = static_cast<int64_t>(summed[4]);
    r.reduce_ms = c.lap();
  }
  if (c.sharded) r.gather_ms = c.sharded->take_gather_wait_ms();  // in the forward, when overlapped
  if (!finite) {
    r.finite = false;
    return r;
  }
  std::vector<at::Tensor> grads;
  auto* sharded = dynamic_cast<ShardedOptimizer*>(&optimizer);
  if (sharded) {
    grads = sharded->shard_gradients();  // this rank's chunks: the norm is the root of their squares summed over ranks
  } else {
    for (const auto& p : model.parameters()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
  }
  read_loss_and_norm(grads, loss_sum, r);
  if (sharded) r.grad_norm = std::sqrt(reducer->sum({r.grad_norm * r.grad_norm}).front());
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    r.finite = false;
    return r;
  }
  clip_gradients(model, optimizer, clip, r.grad_norm);
  optimizer.step();
  c.part_done(grads.empty() ? at::Tensor() : grads.front());
  r.update_ms = c.lap();
  if (sharded) r.gather_ms += sharded->take_gather_wait_ms();  // at the step's end, unless overlapped
  return r;
}

}  // namespace lmkit::train
