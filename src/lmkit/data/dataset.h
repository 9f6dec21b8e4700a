// Examples and datasets: what objectives produce and the loader batches.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lmkit/core/runtime.h"

namespace lmkit::data {

/// One training example; empty vectors and negative labels mean "absent".
struct Example {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;     ///< BERT segments
  std::vector<int32_t> labels;             ///< token targets, -100 = ignored (same length as the targets)
  std::vector<int32_t> decoder_input_ids;  ///< when not derived from labels by the model
  std::vector<int32_t> document_ids;       ///< packed documents (Batch::extra's kDocumentIds), or empty
  std::vector<int32_t> position_ids;       ///< restarted positions (Batch::extra's kPositionIds), or empty
  /// An objective's own per-example labels by name, collated into Batch::extra as (B)
  /// int64 (NSP's kNextSentenceLabel, core/batch.h). Every example of a batch has the same names.
  std::vector<std::pair<std::string, int64_t>> row_labels;
  /// An image (ViT, MAE) instead of input_ids: its pixels, normalised, channel-major
  /// (C·H·W floats), collated into Batch::extra's kPixelValues as (B, C, H, W).
  std::vector<float> pixels;
  std::vector<int64_t> image_shape;        ///< {C, H, W} of `pixels`
  std::vector<float> patch_noise;          ///< MAE's per-patch noise (Batch::extra's kMaeNoise), or empty
  int64_t class_label = -1;                ///< classification
  double target = std::numeric_limits<double>::quiet_NaN();  ///< regression
};

/// How many samples of one source a mixture has drawn, and the source's epochs that makes.
struct SourceDraws {
  std::string name;
  int64_t samples = 0;
  double epochs = 0;  ///< fractional: samples over the source's epoch size
};

/// A dataset whose examples are pure functions of (index, epoch) and its seed:
/// the same triple always gives the same example, so masking changes with the
/// epoch yet a resumed run sees what an uninterrupted one would have.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of examples in `epoch` (objectives like NSP vary it slightly by epoch).
  virtual int64_t size(int64_t epoch) const = 0;
  virtual Example get(int64_t index, int64_t epoch) const = 0;
  /// Approximate length of example `index`, for length bucketing (0: unknown).
  virtual int64_t length_hint(int64_t index) const { return 0; }
  /// Whether its examples are in the order training should see them (a mixture's interleaving):
  /// the loader then does not shuffle them.
  virtual bool keeps_order() const { return false; }
  /// What its first `samples` examples hold, by source (a mixture's); empty for one source.
  virtual std::vector<SourceDraws> draws(int64_t samples) const { return {}; }
};

/// The RNG for one example: seeded from (seed, epoch, index) only.
inline std::mt19937_64 example_rng(uint64_t seed, int64_t epoch, int64_t index) {
  return std::mt19937_64(derive_seed(derive_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index)));
}

/// Uniform integer in [lo, hi] (inclusive), platform-independent (unlike std::uniform_int_distribution).
inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(span == 0 ? rng() : rng() % span);
}
/// Uniform double in [0, 1), platform-independent.
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// Fisher–Yates shuffle with uniform_int (std::shuffle's output is not portable).
template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[uniform_int(rng, 0, i)]);
}

}  // namespace lmkit::data
