// Weighted mixtures of corpora (Wikipedia + books + web, as every pretraining recipe since
// BERT): `--train wiki=0.7:PATH,books=0.3:PATH`. The samples of every source are drawn in a
// fixed interleaving that keeps each source's share at its weight (Megatron-LM's blended
// datasets), a pure function of (seed, sample), so a resumed run sees exactly what an
// uninterrupted one would whatever the thread or process count; each source runs through its
// own epochs, each shuffled with its own seed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lmkit/data/dataset.h"

namespace lmkit::data {

/// One source of a mixture as `--train` names it: NAME=WEIGHT:PATH (WEIGHT 1 when left out).
struct MixtureEntry {
  std::string name;
  double weight = 1.0;
  std::string path;
};

/// The sources of a mixture `spec` ("NAME=WEIGHT:PATH,NAME=WEIGHT:PATH", or NAME:PATH for
/// weight 1), or none when `spec` is one path (an existing file or directory is always one).
/// InputError for a spec that is neither: a repeated or empty name, a weight that is no
/// positive number, an empty path.
std::vector<MixtureEntry> parse_mixture(const std::string& spec);

/// One source of a MixtureDataset: its examples and its share.
struct MixtureSource {
  std::string name;
  double weight = 1.0;
  std::shared_ptr<const Dataset> dataset;
};

/// Samples drawn from several datasets by weight. A period of `period` samples (the loader's
/// epoch) interleaves the sources by largest deficit (sample i goes to the source whose
/// weight·(i + 1) most exceeds its count so far), so any window of N samples holds each
/// source's share to within about 2/N; the k-th sample of a source is example
/// perm_e(k − start of its epoch e) of the source's epoch e, perm_e a shuffle seeded by
/// (seed, source, e). The loader keeps this order (keeps_order()).
class MixtureDataset : public Dataset {
 public:
  /// `period`: samples per loader epoch; a multiple of the global batch so that no sample is dropped.
  MixtureDataset(std::vector<MixtureSource> sources, uint64_t seed, int64_t period);
  int64_t size(int64_t) const override { return static_cast<int64_t>(plan_.size()); }
  Example get(int64_t index, int64_t epoch) const override;
  bool keeps_order() const override { return true; }
  std::vector<SourceDraws> draws(int64_t samples) const override;

  const std::vector<MixtureSource>& sources() const { return sources_; }
  /// The source of each sample of a period (for tests).
  const std::vector<int32_t>& plan() const { return plan_; }

 private:
  // Which example of its own epochs the k-th sample of source s is: (epoch, index).
  std::pair<int64_t, int64_t> locate(size_t s, int64_t k) const;
  // The source's shuffled order of its epoch `epoch` (one cached per source).
  std::shared_ptr<const std::vector<int64_t>> order(size_t s, int64_t epoch) const;

  std::vector<MixtureSource> sources_;
  uint64_t seed_;
  std::vector<int32_t> plan_;        // the source of each sample of a period
  std::vector<int64_t> rank_;        // each sample's count among its source's earlier ones in the period
  std::vector<int64_t> per_period_;  // samples of each source in a period
  mutable std::mutex mutex_;
  mutable std::vector<std::vector<int64_t>> epoch_starts_;  // per source: k of each epoch's first sample
  mutable std::map<size_t, std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>>> orders_;
};

}  // namespace lmkit::data
