// BERT's masked-LM corruption (Devlin et al. 2018, §3.1 and Appendix A):
// choose 15% of the non-special positions; of those 80% become [MASK], 10% a
// random regular token, 10% stay; labels hold the original token at chosen
// positions and -100 elsewhere. With `spans`, SpanBERT's span masking
// (Joshi et al. 2020, §3.1) instead.
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
  /// SpanBERT: contiguous spans of whole words, lengths from a geometric distribution,
  /// 80/10/10 decided per span; an unmasked token always separates two spans.
  bool spans = false;
  double span_p = 0.2;           ///< the geometric distribution's p (SpanBERT: 0.2)
  int64_t max_span = 10;         ///< longest span in words; longer draws are redrawn (mean 3.8 at p = 0.2)
};

/// Corrupts `ids` in place and returns the labels. Special tokens are never
/// chosen; as in google-research/bert, the number chosen is
/// max(1, round(candidates × probability)), capped by max_predictions.
/// With options.spans, apply_span_masking.
std::vector<int32_t> apply_mlm(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tokenizer,
                               const MaskingOptions& options, std::mt19937_64& rng);

/// SpanBERT's span masking, as its PairWithSpanMaskingScheme: until the count above is
/// reached, draw a length ℓ ∈ [1, max_span] words with P(ℓ) ∝ p(1−p)^(ℓ−1), a token
/// uniformly among the candidates, and mask from the start of its word ℓ whole words
/// on, stopping at a special token, before a word next to an earlier span (so an
/// unmasked token stays between spans, from which the span boundary objective reads
/// them) and before the count would be passed. A draw whose first word is taken, next
/// to a span or past the count is redrawn (at most 20 draws per word of the sequence).
/// Each span is then wholly [MASK] (80%), wholly random regular tokens (10%) or kept (10%).
std::vector<int32_t> apply_span_masking(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tokenizer,
                                        const MaskingOptions& options, std::mt19937_64& rng);

/// P(ℓ) of span lengths 1..max_span (index ℓ − 1).
std::vector<double> span_length_distribution(double p, int64_t max_span);

}  // namespace lmkit::data
