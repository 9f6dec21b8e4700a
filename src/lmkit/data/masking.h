// BERT's masked-LM corruption (Devlin et al. 2018, §3.1 and Appendix A):
// choose 15% of the non-special positions; of those 80% become [MASK], 10% a
// random regular token, 10% stay; labels hold the original token at chosen
// positions and -100 elsewhere.
#pragma once

#include <random>
#include <vector>

#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

struct MaskingOptions {
  double probability = 0.15;     ///< fraction of candidate positions chosen
  double mask_fraction = 0.8;    ///< of the chosen: replaced by [MASK]
  double random_fraction = 0.1;  ///< of the chosen: replaced by a random regular token (the rest stay)
  bool whole_word = false;       ///< choose whole words (SentencePiece "▁" boundaries), not pieces
  int64_t max_predictions = 0;   ///< cap per sequence (0: none)
};

/// Corrupts `ids` in place and returns the labels. Special tokens are never
/// chosen; as in google-research/bert, the number chosen is
/// max(1, round(candidates × probability)), capped by max_predictions.
std::vector<int32_t> apply_mlm(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tokenizer,
                               const MaskingOptions& options, std::mt19937_64& rng);

}  // namespace lmkit::data
