#include "lmkit/data/masking.h"

#include <algorithm>
#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/data/dataset.h"

namespace lmkit::data {

namespace {

// The number of positions to choose among `candidates`: max(1, round(candidates × p)), capped.
size_t masking_target(size_t candidates, const MaskingOptions& o) {
  size_t target = std::max<size_t>(1, static_cast<size_t>(std::llround(static_cast<double>(candidates) * o.probability)));
  if (o.max_predictions > 0) target = std::min<size_t>(target, static_cast<size_t>(o.max_predictions));
  return target;
}

// Labels positions [begin, end) and corrupts them with one draw: all [MASK], all random regular tokens, or kept.
void corrupt_span(std::vector<int32_t>& ids, std::vector<int32_t>& labels, size_t begin, size_t end,
                  const tokenizer::Tokenizer& tok, const MaskingOptions& o, std::mt19937_64& rng) {
  const std::vector<int32_t>& regular = tok.regular_ids();
  const double r = uniform01(rng);
  for (size_t pos = begin; pos < end; ++pos) {
    labels[pos] = ids[pos];
    if (r < o.mask_fraction) {
      ids[pos] = tok.specials().mask;
    } else if (r < o.mask_fraction + o.random_fraction) {
      ids[pos] = regular[static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(regular.size()) - 1))];
    }
  }
}

// Whole words [begin, end) of the non-special positions: a word-start piece or a special token before opens one.
struct Word {
  size_t begin, end;
};

std::vector<Word> words_of(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok) {
  std::vector<Word> words;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (tok.is_special(ids[i])) continue;
    if (words.empty() || words.back().end != i || tok.starts_word(ids[i])) words.push_back({i, i + 1});
    else words.back().end = i + 1;
  }
  return words;
}

}  // namespace

std::vector<double> span_length_distribution(double p, int64_t max_span) {
  std::vector<double> probability;
  double total = 0;
  for (int64_t l = 1; l <= max_span; ++l) {
    probability.push_back(p * std::pow(1 - p, static_cast<double>(l - 1)));
    total += probability.back();
  }
  for (double& x : probability) x /= total;
  return probability;
}

std::vector<int32_t> apply_span_masking(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok,
                                        const MaskingOptions& o, std::mt19937_64& rng) {
  check_input(tok.specials().mask >= 0, "span masking needs a tokenizer with a mask token");
  check_input(o.span_p > 0 && o.span_p <= 1 && o.max_span >= 1, "span masking needs 0 < p <= 1 and a longest span >= 1");
  std::vector<int32_t> labels(ids.size(), -100);
  const std::vector<Word> words = words_of(ids, tok);
  std::vector<size_t> word_at;  // the word of each candidate position, in order
  for (size_t w = 0; w < words.size(); ++w) word_at.insert(word_at.end(), words[w].end - words[w].begin, w);
  if (word_at.empty()) return labels;
  const size_t target = masking_target(word_at.size(), o);
  const std::vector<double> lengths = span_length_distribution(o.span_p, o.max_span);

  std::vector<char> taken(words.size(), 0);
  auto joined = [&](size_t a) { return a + 1 < words.size() && words[a].end == words[a + 1].begin; };  // a, a+1 adjacent
  auto size = [&](size_t w) { return words[w].end - words[w].begin; };
  // Word w can join a span that ends at w - 1 (or open one) without touching another span on its right.
  auto right_free = [&](size_t w) { return !taken[w] && !(joined(w) && taken[w + 1]); };
  size_t chosen = 0;
  for (size_t draw = 0; draw < 20 * words.size() && chosen < target; ++draw) {
    const double u = uniform01(rng);
    size_t length = 1;  // in words, by the inverse of the cumulative distribution
    double cumulative = lengths[0];
    while (length < lengths.size() && u >= cumulative) cumulative += lengths[length++];
    const size_t w = word_at[static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(word_at.size()) - 1))];
    const bool left_free = !(w > 0 && joined(w - 1) && taken[w - 1]);
    if (!left_free || !right_free(w) || chosen + size(w) > target) continue;
    size_t end = w + 1;  // words [w, end)
    chosen += size(w), taken[w] = 1;
    while (end - w < length && joined(end - 1) && right_free(end) && chosen + size(end) <= target) {
      chosen += size(end), taken[end] = 1, ++end;
    }
    corrupt_span(ids, labels, words[w].begin, words[end - 1].end, tok, o, rng);
  }
  return labels;
}

std::vector<int32_t> apply_mlm(std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok, const MaskingOptions& o,
                               std::mt19937_64& rng) {
  if (o.spans) return apply_span_masking(ids, tok, o, rng);
  const int32_t mask_id = tok.specials().mask;
  check_input(mask_id >= 0, "masked-LM needs a tokenizer with a mask token");
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
  const size_t target = masking_target(candidates, o);
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
