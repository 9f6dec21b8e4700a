#include "lmkit/data/masking.h"

#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/data/dataset.h"

namespace lmkit::data {

std::vector<int32_t> apply_mlm(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok, const MaskingOptions& o,
                               std::mt19937_64& rng) {
  const int32_t mask_id = tok.specials().mask;
  check_input(mask_id >= 0, "masked-LM needs a tokenizer with a [MASK] token (a bert-family tokenizer)");
  std::vector<int32_t> labels(ids.size(), -100);
  // Candidate groups: single positions, or whole words (a piece starting with "▁" opens a word).
  std::vector<std::vector<size_t>> groups;
  size_t candidates = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (tok.is_special(ids[i])) continue;
    if (!o.whole_word || groups.empty() || tok.starts_word(ids[i]) || tok.is_special(ids[i - 1])) groups.emplace_back();
    groups.back().push_back(i);
    ++candidates;
  }
  if (candidates == 0) return labels;
  size_t target = std::max<size_t>(1, static_cast<size_t>(std::llround(static_cast<double>(candidates) * o.probability)));
  if (o.max_predictions > 0) target = std::min<size_t>(target, static_cast<size_t>(o.max_predictions));
  shuffle(groups, rng);

  const std::vector<int32_t>& regular = tok.regular_ids();
  size_t chosen = 0;
  for (const auto& group : groups) {
    if (chosen >= target) break;
    if (chosen + group.size() > target) continue;  // google-research/bert: skip words that overshoot
    for (size_t pos : group) {
      labels[pos] = ids[pos];
      const double r = uniform01(rng);
      if (r < o.mask_fraction) {
        ids[pos] = mask_id;
      } else if (r < o.mask_fraction + o.random_fraction) {
        ids[pos] = regular[static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(regular.size()) - 1))];
      }
    }
    chosen += group.size();
  }
  return labels;
}

}  // namespace lmkit::data
