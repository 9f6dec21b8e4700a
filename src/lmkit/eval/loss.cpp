#include "lmkit/eval/loss.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/models/family.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

Json evaluate_loss(models::Model& model, std::shared_ptr<const data::Dataset> dataset, data::LoaderOptions lo,
                   c10::Device device, int64_t max_batches, dist::Group* group) {
  lo.shuffle = false, lo.drop_last = false;
  lo.rank = group ? group->rank() : 0, lo.world_size = group ? group->size() : 1;
  data::Loader loader(std::move(dataset), lo);  // epoch 0 every time: the same masks at every evaluation
  const int64_t n = max_batches > 0 ? std::min(max_batches, loader.batches_per_epoch(0)) : loader.batches_per_epoch(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  double loss_sum = 0, mlm_sum = 0;
  int64_t targets = 0, nsp_correct = 0, nsp_total = 0, tokens = 0, mlm_batches = 0;
  for (int64_t i = 0; i < n; ++i) {
    Batch b = loader.next().to(device);
    if (!b.input_ids.defined()) continue;  // this rank's share of the last batch is empty
    Output out = model.forward(b);
    const int64_t t = models::count_targets(model, b);
    tokens += b.num_tokens();
    if (out.mlm_loss.defined()) {  // BERT pre-training reports MLM and NSP apart
      ++mlm_batches;
      mlm_sum += out.mlm_loss.item<double>() * t;
      if (out.nsp_loss.defined()) {
        loss_sum += out.nsp_loss.item<double>() * b.input_ids.size(0);
        nsp_correct += out.seq_relationship_logits.argmax(-1).eq(b.next_sentence_label).sum().item<int64_t>();
        nsp_total += b.input_ids.size(0);
      }
    } else {
      loss_sum += out.loss.item<double>() * t;
    }
    targets += t;
  }
  if (group) {
    const auto sums = group->sum({loss_sum, mlm_sum, static_cast<double>(targets), static_cast<double>(nsp_correct),
                                  static_cast<double>(nsp_total), static_cast<double>(tokens),
                                  static_cast<double>(mlm_batches)}, device);
    loss_sum = sums[0], mlm_sum = sums[1];
    targets = static_cast<int64_t>(sums[2]), nsp_correct = static_cast<int64_t>(sums[3]);
    nsp_total = static_cast<int64_t>(sums[4]), tokens = static_cast<int64_t>(sums[5]);
    mlm_batches = static_cast<int64_t>(sums[6]);
  }
  Json r;
  if (mlm_batches > 0) {
    const double mlm = mlm_sum / std::max<int64_t>(targets, 1);
    r["mlm_loss"] = mlm;
    r["mlm_perplexity"] = std::exp(mlm);
    if (nsp_total > 0) {
      r["nsp_loss"] = loss_sum / nsp_total;
      r["nsp_accuracy"] = static_cast<double>(nsp_correct) / nsp_total;
    }
    r["loss"] = mlm + (nsp_total > 0 ? loss_sum / nsp_total : 0.0);
    r["perplexity"] = std::exp(mlm);
  } else {
    r["loss"] = loss_sum / std::max<int64_t>(targets, 1);
    r["perplexity"] = std::exp(r["loss"].get<double>());
  }
  r["targets"] = targets;
  r["tokens"] = tokens;
  r["batches"] = n;
  return r;
}

}  // namespace lmkit::eval
