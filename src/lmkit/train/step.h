// One optimizer step, shared by lmkit-pretrain's trainer and lmkit-bench, so the
// benchmark measures exactly the training path.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lmkit/core/batch.h"
#include "lmkit/dist/reducer.h"
#include "lmkit/models/model.h"
#include "lmkit/train/adamw.h"
#include "lmkit/train/optimizer.h"

namespace lmkit::train {

/// AdamW through the registry (make_optimizer with options.name "adamw"): lmkit-bench and tests.
std::unique_ptr<torch::optim::Optimizer> make_adamw(torch::nn::Module& model, OptimizerOptions options);

struct StepResult {
  double loss = 0;       ///< the step's loss: each term's sum over every target of the step / their number
  double grad_norm = 0;  ///< before clipping
  int64_t tokens = 0;    ///< real (non-padding) input tokens (all ranks)
  int64_t images = 0;    ///< images (ViT, MAE: batches of pixel_values, no tokens; all ranks)
  bool finite = true;    ///< false: the update was skipped
  /// Wall time of the parts (update: clip + optimizer). On a GPU they are the times the
  /// kernels were queued unless train_step's time_parts makes each part wait for them.
  double forward_ms = 0, backward_ms = 0, update_ms = 0;
  double reduce_ms = 0;  ///< waiting for the gradient all-reduce after the last backward (data-parallel)
  /// A sharded optimizer's wait for the parameters' all-gather (ShardedOptimizer::take_gather_wait_ms).
  double gather_ms = 0;
  bool stop = false;     ///< some rank asked to stop after this step (train_step's `stop`), so every rank stops
};

/// Forward and backward over `batches` (gradient accumulation), clip the global
/// norm to `clip` (0: off), and step — unless the loss or the gradient norm is not
/// finite, which skips the update. Every loss term (the task loss; BERT's MLM and
/// NSP apart) is normalised by its number of targets over the whole step: all
/// micro-batches and, with a `reducer`, all ranks, whose gradients it sums. So
/// accumulation over k batches of B, or W ranks of B, trains as one batch of kB or WB.
/// An empty batch (a rank's share of an epoch's last partial batch) only joins the
/// collectives. With `bf16`, the forward pass runs under bf16 autocast (float32
/// master weights). A FusedAdamW applies the clipping coefficient inside its update pass.
/// One process waits for the device once per step (the loss and the gradient norm, read
/// together before the update); `time_parts` adds a wait after each part for true timings.
/// `stop` (this rank received SIGTERM) travels with the step's scalars, so that
/// StepResult::stop is the same on every rank without a collective of its own.
/// How a step computes: float32; bf16 autocast over float32 weights; or bf16 weights
/// (--dtype bf16-weights): for the forward and backward passes every float32 parameter holds
/// its bf16 rounding, so the embeddings, the residual stream and the gradients are bf16 as in
/// llm.c, under autocast for the ops it keeps in float32; the float32 values stay the master
/// weights that the optimizer updates, a checkpoint saves and evaluation uses.
enum class Precision { kFp32, kBf16, kBf16Weights };

/// Parses "fp32", "bf16" or "bf16-weights" (anything else: an InputError naming `flag`).
Precision parse_precision(const std::string& name, const std::string& flag = "--dtype");

StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                      double clip, Precision precision, dist::GradientReducer* reducer = nullptr,
                      bool time_parts = false, bool stop = false);

/// train_step with bf16 autocast (true) or float32 (false).
inline StepResult train_step(models::Model& model, torch::optim::Optimizer& optimizer, const std::vector<Batch>& batches,
                             double clip, bool bf16, dist::GradientReducer* reducer = nullptr, bool time_parts = false,
                             bool stop = false) {
  return train_step(model, optimizer, batches, clip, bf16 ? Precision::kBf16 : Precision::kFp32, reducer, time_parts,
                    stop);
}

}  // namespace lmkit::train
