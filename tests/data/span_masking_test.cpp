// SpanBERT's span masking (data/masking.h) on the bundled WikiText sample: the
// statistics of Joshi et al. 2020 §3.1, whole words, one decision per span, a gap
// between spans, and masks that are functions of (index, epoch, seed).
#include <catch2/catch.hpp>

#include <cmath>

#include "data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/data/masking.h"
#include "lmkit/data/objectives.h"

using namespace lmkit;

namespace {

struct SpanStats {
  int64_t candidates = 0, chosen = 0, spans = 0, words = 0, masked = 0, random = 0, kept = 0, tokens = 0;
  std::vector<int64_t> lengths = std::vector<int64_t>(11, 0);  // spans by length in words
};

// Walks every example's runs of labelled positions (the spans) and checks what must hold of each.
SpanStats span_stats(const data::Dataset& ds, const tokenizer::Tokenizer& tok, int64_t epoch) {
  SpanStats s;
  for (int64_t i = 0; i < ds.size(epoch); ++i) {
    const auto e = ds.get(i, epoch);
    const auto& ids = e.input_ids;
    const auto& labels = e.labels;
    for (size_t j = 0; j < ids.size(); ++j) {
      ++s.tokens;
      const int32_t original = labels[j] >= 0 ? labels[j] : ids[j];
      if (!tok.is_special(original)) ++s.candidates;
      if (labels[j] < 0) continue;
      REQUIRE_FALSE(tok.is_special(labels[j]));
      ++s.chosen;
      if (j > 0 && labels[j - 1] >= 0) continue;  // not a span's first position
      // A span: [j, end); it starts a word and the position after it starts a word or is special.
      size_t end = j;
      while (end < ids.size() && labels[end] >= 0) ++end;
      REQUIRE(j > 0);
      REQUIRE(end < ids.size());  // the block's [SEP] is never chosen
      REQUIRE((tok.starts_word(labels[j]) || tok.is_special(ids[j - 1])));
      REQUIRE((tok.is_special(ids[end]) || tok.starts_word(ids[end])));
      int64_t words = 0, mask = 0, same = 0;
      for (size_t k = j; k < end; ++k) {
        if (k == j || tok.starts_word(labels[k])) ++words;
        mask += ids[k] == tok.specials().mask;
        same += ids[k] == labels[k];
      }
      const int64_t n = static_cast<int64_t>(end - j);
      REQUIRE(words <= 10);  // two spans never touch: a run is one span of at most max_span words
      REQUIRE((mask == 0 || mask == n));  // one decision per span
      ++s.spans, s.words += words, ++s.lengths[static_cast<size_t>(words)];
      if (mask == n) ++s.masked;
      else if (same == n) ++s.kept;
      else ++s.random;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("span masking: SpanBERT's length distribution has mean 3.8 words", "[data][spanbert]") {
  const auto p = data::span_length_distribution(0.2, 10);
  REQUIRE(p.size() == 10);
  double mean = 0, total = 0;
  for (size_t l = 0; l < p.size(); ++l) mean += static_cast<double>(l + 1) * p[l], total += p[l];
  CHECK(total == Approx(1.0));
  CHECK(mean == Approx(3.797).margin(0.001));
  CHECK(p[1] / p[0] == Approx(0.8));
}

TEST_CASE("span masking: 15% of tokens in whole-word spans, 80/10/10 per span, over 300k tokens", "[data][spanbert]") {
  for (const std::string family : {"bert", "roberta"}) for (int64_t seq : {128, 512}) {
    const auto& f = test::data_fixture(family);
    data::MaskingOptions o;
    o.spans = true;
    data::MaskedLmDataset ds(f.corpus, *f.tok, seq, o, 11);
    const SpanStats s = span_stats(ds, *f.tok, 0);
    const double rate = double(s.chosen) / s.candidates, mean = double(s.words) / s.spans;
    INFO(family << " " << seq << ": " << s.tokens << " tokens, chosen " << rate << ", " << s.spans << " spans of mean " << mean
                << " words; mask " << double(s.masked) / s.spans << " random " << double(s.random) / s.spans << " kept "
                << double(s.kept) / s.spans << "; 1-word spans " << double(s.lengths[1]) / s.spans << ", 10-word "
                << double(s.lengths[10]) / s.spans);
    REQUIRE(s.tokens >= 250000);
    CHECK(std::abs(rate - 0.15) <= 0.01);
    // Lengths are drawn with mean 3.8 words; a span stops at the 15% count, at a special token
    // and a word before another span, so realised spans are shorter, the more so in short blocks
    // (measured: 3.27 words at 512 tokens, 2.51 at 128).
    CHECK(mean >= (seq == 512 ? 3.1 : 2.3));
    CHECK(mean <= 3.8);
    CHECK(std::abs(double(s.masked) / s.spans - 0.8) <= 0.02);
    CHECK(std::abs(double(s.random) / s.spans - 0.1) <= 0.02);
    CHECK(std::abs(double(s.kept) / s.spans - 0.1) <= 0.02);
    // Shorter spans are more frequent, as the geometric distribution makes them.
    CHECK(s.lengths[1] > s.lengths[3]);
    CHECK(s.lengths[3] > s.lengths[7]);
    CHECK(s.lengths[10] > 0);
  }
}

TEST_CASE("span masking: masks are a function of (index, epoch, seed)", "[data][spanbert]") {
  const auto& f = test::data_fixture("bert");
  data::MaskingOptions o;
  o.spans = true;
  data::MaskedLmDataset a(f.corpus, *f.tok, 64, o, 1), b(f.corpus, *f.tok, 64, o, 1), c(f.corpus, *f.tok, 64, o, 2);
  for (int64_t i : {0, 5, 77}) {
    CHECK(a.get(i, 0).labels == b.get(i, 0).labels);
    CHECK(a.get(i, 0).input_ids == b.get(i, 0).input_ids);
    CHECK(a.get(i, 3).input_ids == b.get(i, 3).input_ids);
  }
  CHECK(a.get(5, 0).labels != a.get(5, 1).labels);
  CHECK(a.get(5, 0).labels != c.get(5, 0).labels);
}

TEST_CASE("span masking: a tokenizer without a mask token is an input error", "[data][spanbert]") {
  const auto& f = test::data_fixture("gpt2");
  data::MaskingOptions o;
  o.spans = true;
  std::vector<int32_t> ids = f.tok->encode("a few words of text");
  std::mt19937_64 rng(1);
  CHECK_THROWS_AS(data::apply_mlm(ids, *f.tok, o, rng), lmkit::Error);
}
