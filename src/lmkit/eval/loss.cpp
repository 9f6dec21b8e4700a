#include "lmkit/eval/loss.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lmkit/core/stop.h"
#include "lmkit/models/family.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

namespace {

// Named running sums (numerator, count), in the order names first appear.
struct Sums {
  std::vector<std::string> names;
  std::vector<double> sums, counts;
  void add(const std::string& name, double sum, double count) {
    size_t k = 0;
    while (k < names.size() && names[k] != name) ++k;
    if (k == names.size()) names.push_back(name), sums.push_back(0), counts.push_back(0);
    sums[k] += sum, counts[k] += count;
  }
  double ratio(size_t k) const { return sums[k] / std::max(counts[k], 1.0); }
  void drop_empty() {
    for (size_t k = names.size(); k-- > 0;) {
      if (counts[k] > 0) continue;
      names.erase(names.begin() + static_cast<std::ptrdiff_t>(k));
      sums.erase(sums.begin() + static_cast<std::ptrdiff_t>(k));
      counts.erase(counts.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  void append_to(std::vector<double>& v) const {
    v.insert(v.end(), sums.begin(), sums.end());
    v.insert(v.end(), counts.begin(), counts.end());
  }
  void read_from(const std::vector<double>& v, size_t& at) {
    const size_t n = names.size();
    std::copy(v.begin() + at, v.begin() + at + n, sums.begin());
    std::copy(v.begin() + at + n, v.begin() + at + 2 * n, counts.begin());
    at += 2 * n;
  }
};

// What an evaluation adds up. Sums by name: each loss term's (mean × targets, targets),
// each metric's (sum, count); a model with a single loss adds (loss × targets, targets).
struct Tally {
  Sums terms, metrics;
  double loss_sum = 0;
  int64_t targets = 0, tokens = 0;
  bool accuracy;

  // Every name is registered before the first batch, so that ranks reduce the same
  // figures whatever their shares hold; names that saw no targets are dropped after.
  Tally(models::Model& model, bool accuracy) : accuracy(accuracy) {
    for (const auto& [name, count] : model.loss_targets(Batch{})) {
      if (name != "loss") terms.add(name, 0, 0);
    }
    for (const auto& name : model.metric_names()) metrics.add(name, 0, 0);
    if (accuracy) metrics.add("accuracy", 0, 0);
  }
  void add(models::Model& model, const Batch& b, const Output& out) {
    tokens += b.num_tokens();
    if (out.terms.empty()) {
      const int64_t t = models::count_targets(model, b);
      loss_sum += out.loss.item<double>() * static_cast<double>(t);
      targets += t;
    }
    for (const auto& term : out.terms) {
      const auto t = term.targets.item<int64_t>();
      terms.add(term.name, term.mean.item<double>() * static_cast<double>(t), static_cast<double>(t));
    }
    for (const auto& m : out.metrics) metrics.add(m.name, m.sum.item<double>(), m.count);
    if (accuracy && out.logits.defined() && b.labels.defined() && out.logits.dim() == b.labels.dim() + 1) {
      const at::Tensor labelled = b.labels.ne(-100);
      const at::Tensor right = out.logits.argmax(-1).eq(b.labels).logical_and(labelled);
      metrics.add("accuracy", right.sum().item<double>(), labelled.sum().item<double>());
    }
  }
  void reduce(dist::Group& group, c10::Device device) {
    std::vector<double> all = {loss_sum, static_cast<double>(targets), static_cast<double>(tokens)};
    terms.append_to(all), metrics.append_to(all);
    all = group.sum(all, device);
    loss_sum = all[0], targets = static_cast<int64_t>(all[1]), tokens = static_cast<int64_t>(all[2]);
    size_t at = 3;
    terms.read_from(all, at), metrics.read_from(all, at);
  }
  // The terms apart (NAME_loss), their sum as the loss; the first (language-modelling)
  // term's perplexity is the model's.
  Json result() {
    terms.drop_empty(), metrics.drop_empty();
    Json r;
    if (terms.names.empty()) {
      r["loss"] = loss_sum / static_cast<double>(std::max<int64_t>(targets, 1));
      // A perplexity of tokens; an image model's loss (MAE's pixel error) has none.
      if (tokens > 0) r["perplexity"] = std::exp(r["loss"].get<double>());
    } else {
      double loss = 0;
      for (size_t k = 0; k < terms.names.size(); ++k) {
        const double mean = terms.ratio(k);
        r[terms.names[k] + "_loss"] = mean;
        if (k == 0) r[terms.names[k] + "_perplexity"] = std::exp(mean);
        loss += mean;
      }
      r["loss"] = loss;
      r["perplexity"] = std::exp(terms.ratio(0));
      targets = static_cast<int64_t>(terms.counts[0]);
    }
    for (size_t k = 0; k < metrics.names.size(); ++k) r[metrics.names[k]] = metrics.ratio(k);
    r["targets"] = targets;
    r["tokens"] = tokens;
    return r;
  }
};

}  // namespace

Json evaluate_loss(models::Model& model, std::shared_ptr<const data::Dataset> dataset, data::LoaderOptions lo,
                   c10::Device device, int64_t max_batches, dist::Group* group, bool accuracy) {
  lo.shuffle = false;
  lo.drop_last = false;
  lo = data::sharded(lo, group);
  data::Loader loader(std::move(dataset), lo);  // epoch 0 every time: the same masks at every evaluation
  const int64_t n = max_batches > 0 ? std::min(max_batches, loader.batches_per_epoch(0)) : loader.batches_per_epoch(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  Tally tally(model, accuracy);
  for (int64_t i = 0; i < n; ++i) {
    check_stop("evaluation");
    Batch b = loader.next().to(device);
    if (b.rows() == 0) continue;  // this rank's share of the last batch is empty
    tally.add(model, b, model.forward(b));
  }
  if (group) tally.reduce(*group, device);
  Json r = tally.result();
  r["batches"] = n;
  return r;
}

}  // namespace lmkit::eval
