#include "lmkit/data/objectives.h"

#include <algorithm>
#include <cmath>

#include "lmkit/core/batch.h"
#include "lmkit/core/error.h"

namespace lmkit::data {

int32_t document_separator(const tokenizer::Tokenizer& tok) {
  return tok.specials().sep >= 0 ? tok.specials().sep : tok.specials().eos;  // [SEP] (BERT), else the end of text
}

PackedStream::PackedStream(std::shared_ptr<const Corpus> corpus, int32_t separator)
    : corpus_(std::move(corpus)), separator_(separator) {
  size_ = corpus_->num_tokens() + corpus_->num_documents();
}

void PackedStream::read(int64_t begin, int64_t end, std::vector<int32_t>& out, std::vector<int32_t>* documents) const {
  // Document d occupies stream positions [begin_token(d) + d, end_token(d) + d], the last one its separator.
  const Corpus& c = *corpus_;
  int64_t lo = 0, hi = c.num_documents() - 1;
  while (lo < hi) {  // the last document starting at or before `begin`
    const int64_t mid = (lo + hi + 1) / 2;
    if (c.document_begin_token(mid) + mid <= begin) lo = mid;
    else hi = mid - 1;
  }
  for (int64_t d = lo, pos = begin; pos < end && d < c.num_documents(); ++d) {
    const int64_t start = c.document_begin_token(d) + d, stop = c.document_end_token(d) + d;  // separator at stop
    const int64_t from = std::max(pos, start), to = std::min(end, stop);
    if (to > from) c.append_tokens(from - d, to - d, out);
    if (end > stop && pos <= stop) out.push_back(separator_);
    if (documents) documents->resize(out.size(), static_cast<int32_t>(d - lo));
    pos = stop + 1;
  }
}

// ---- masked LM -----------------------------------------------------------------

void pack_documents(Example& e, const std::vector<int32_t>& documents, const PackingOptions& packing, bool shifted) {
  if (packing.document_mask) e.document_ids = documents;
  if (packing.reset_positions) {
    e.position_ids.resize(documents.size());
    for (size_t i = 0, start = 0; i < documents.size(); ++i) {
      if (i > 0 && documents[i] != documents[i - 1]) start = i;
      e.position_ids[i] = static_cast<int32_t>(packing.first_position + static_cast<int64_t>(i - start));
    }
  }
  if (!packing.document_mask || !shifted) return;
  for (size_t i = 1; i < documents.size() && i < e.labels.size(); ++i) {
    if (documents[i] != documents[i - 1]) e.labels[i] = -100;  // predicted from the document before: no target
  }
}

MaskedLmDataset::MaskedLmDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tok, int64_t seq_len,
                                 MaskingOptions masking, uint64_t seed, PackingOptions packing)
    : tok_(tok), stream_(corpus, document_separator(tok)), seq_len_(seq_len), masking_(masking), seed_(seed),
      packing_(packing) {
  check_input(seq_len >= 8, "--seq-len must be at least 8 for masked LM");
  check_input(tok.specials().cls >= 0 && tok.specials().mask >= 0, "masked LM needs a tokenizer with cls and mask tokens");
  num_blocks_ = stream_.size() / (seq_len - 2);
  check_input(num_blocks_ > 0, corpus->name() + ": too short for one sequence of " + std::to_string(seq_len) + " tokens");
}

Example MaskedLmDataset::get(int64_t index, int64_t epoch) const {
  Example e;
  e.input_ids.push_back(tok_.specials().cls);
  std::vector<int32_t> documents = {0};  // [CLS] opens the first document, the last [SEP] closes the last
  stream_.read(index * (seq_len_ - 2), (index + 1) * (seq_len_ - 2), e.input_ids, packing_.any() ? &documents : nullptr);
  e.input_ids.push_back(tok_.specials().sep);
  auto rng = example_rng(seed_, epoch, index);
  e.labels = apply_mlm(e.input_ids, tok_, masking_, rng);
  if (packing_.any()) {
    documents.push_back(documents.back());
    pack_documents(e, documents, packing_, /*shifted=*/false);
  }
  return e;
}

// ---- next-sentence prediction ----------------------------------------------------

NextSentenceDataset::NextSentenceDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tok,
                                         int64_t seq_len, MaskingOptions masking, uint64_t seed, double short_seq_prob)
    : corpus_(std::move(corpus)), tok_(tok), seq_len_(seq_len), masking_(masking), seed_(seed),
      short_seq_prob_(short_seq_prob) {
  check_input(seq_len >= 8, "--seq-len must be at least 8 for next-sentence prediction");
  check_input(tok.specials().cls >= 0 && tok.specials().sep >= 0, "next-sentence prediction needs a tokenizer with cls and sep tokens");
  check_input(corpus_->num_documents() >= 2,
              corpus_->path() + ": next-sentence prediction needs at least 2 documents (random B comes from another one)");
}

namespace {

// A random B: from a different document, chosen uniformly among the others, at a random
// sentence; at least one sentence, then up to `budget` tokens.
std::pair<int64_t, int64_t> random_next_sentences(const Corpus& c, int64_t doc, int64_t budget, std::mt19937_64& rng) {
  int64_t other = uniform_int(rng, 0, c.num_documents() - 2);
  if (other >= doc) ++other;
  const int64_t o_first = c.document_first_sentence(other), o_end = c.document_end_sentence(other);
  const int64_t b_begin = uniform_int(rng, o_first, o_end - 1);
  int64_t b_end = b_begin, b_len = 0;
  do {
    b_len += c.sentence_end(b_end) - c.sentence_begin(b_end);
    ++b_end;
  } while (b_end < o_end && b_len < budget);
  return {b_begin, b_end};
}

}  // namespace

std::shared_ptr<const std::vector<NextSentenceDataset::Pair>> NextSentenceDataset::plan(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (plan_epoch_ == epoch) return plan_;
  const Corpus& c = *corpus_;
  std::mt19937_64 rng(derive_seed(derive_seed(seed_, 0x4e5350), static_cast<uint64_t>(epoch)));
  const int64_t max_tokens = seq_len_ - 3;  // [CLS] A [SEP] B [SEP]
  std::vector<Pair> pairs;
  auto len = [&](int64_t s) { return c.sentence_end(s) - c.sentence_begin(s); };
  for (int64_t doc = 0; doc < c.num_documents(); ++doc) {
    const int64_t first = c.document_first_sentence(doc), end = c.document_end_sentence(doc);
    int64_t target = max_tokens;
    if (uniform01(rng) < short_seq_prob_) target = uniform_int(rng, 2, max_tokens);
    int64_t chunk_begin = first, chunk_len = 0;
    for (int64_t i = first; i < end; ++i) {
      chunk_len += len(i);
      if (i != end - 1 && chunk_len < target) continue;
      bool random_next = uniform01(rng) < 0.5;
      int64_t chunk_end = i + 1;
      if (chunk_end - chunk_begin == 1 && !random_next) {
        // Deviation from google-research/bert, which forces a random B for a
        // one-sentence chunk: that biases IsNext well below 50% on corpora with
        // long sentences (43% on the bundled WikiText sample) and on short
        // documents (44% on PTB in documents of 20 sentences). The coin decides:
        // B is the next sentence; at a document's end, A is the sentence before.
        if (chunk_end < end) {
          i = chunk_end++;
        } else if (chunk_begin > first) {
          pairs.push_back({chunk_begin - 1, chunk_begin, chunk_begin, chunk_end, false});
          continue;
        } else {
          continue;  // a one-sentence document has no continuation: no pair
        }
      }
      const int64_t chunk_size = chunk_end - chunk_begin;
      const int64_t a_end = chunk_begin + (chunk_size >= 2 ? uniform_int(rng, 1, chunk_size - 1) : 1);
      int64_t a_len = 0;
      for (int64_t s = chunk_begin; s < a_end; ++s) a_len += len(s);
      if (random_next) {
        const auto [b_begin, b_end] = random_next_sentences(c, doc, target - a_len, rng);
        pairs.push_back({chunk_begin, a_end, b_begin, b_end, true});
        i = a_end - 1;  // the unused sentences of this chunk go back
      } else {
        pairs.push_back({chunk_begin, a_end, a_end, chunk_end, false});
      }
      chunk_begin = i + 1, chunk_len = 0;
      // google-research/bert draws one target length per document; after a
      // random B the chunk restarts from A's end.
    }
  }
  plan_ = std::make_shared<const std::vector<Pair>>(std::move(pairs));
  plan_epoch_ = epoch;
  return plan_;
}

int64_t NextSentenceDataset::size(int64_t epoch) const { return static_cast<int64_t>(plan(epoch)->size()); }

Example NextSentenceDataset::get(int64_t index, int64_t epoch) const {
  Pair p;
  {
    const auto pl = plan(epoch);
    check_input(index >= 0 && index < static_cast<int64_t>(pl->size()), "NSP example index out of range");
    p = (*pl)[static_cast<size_t>(index)];
  }
  const Corpus& c = *corpus_;
  std::vector<int32_t> a, b;
  c.append_tokens(c.sentence_begin(p.a_begin), c.sentence_begin(p.a_end), a);
  c.append_tokens(c.sentence_begin(p.b_begin), c.sentence_begin(p.b_end), b);
  auto rng = example_rng(seed_, epoch, index);
  // truncate_seq_pair: trim the longer segment, from the front or the back at random.
  const size_t max_tokens = static_cast<size_t>(seq_len_ - 3);
  size_t a_lo = 0, a_hi = a.size(), b_lo = 0, b_hi = b.size();
  while ((a_hi - a_lo) + (b_hi - b_lo) > max_tokens) {
    const bool trim_a = (a_hi - a_lo) > (b_hi - b_lo);
    size_t& lo = trim_a ? a_lo : b_lo;
    size_t& hi = trim_a ? a_hi : b_hi;
    if (uniform01(rng) < 0.5) ++lo;
    else --hi;
  }
  Example e;
  const auto& s = tok_.specials();
  e.input_ids.push_back(s.cls);
  e.input_ids.insert(e.input_ids.end(), a.begin() + static_cast<std::ptrdiff_t>(a_lo), a.begin() + static_cast<std::ptrdiff_t>(a_hi));
  e.input_ids.push_back(s.sep);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  e.input_ids.insert(e.input_ids.end(), b.begin() + static_cast<std::ptrdiff_t>(b_lo), b.begin() + static_cast<std::ptrdiff_t>(b_hi));
  e.input_ids.push_back(s.sep);
  e.token_type_ids.resize(e.input_ids.size(), 1);
  e.row_labels = {{kNextSentenceLabel, p.random_next ? 1 : 0}};
  e.labels = apply_mlm(e.input_ids, tok_, masking_, rng);
  return e;
}

// ---- span corruption ---------------------------------------------------------------

std::pair<int64_t, int64_t> span_corruption_lengths(int64_t input_length, double noise_density, double mean_span) {
  auto lengths = [&](int64_t tokens) {
    const int64_t noise = std::llround(static_cast<double>(tokens) * noise_density);
    const int64_t spans = std::llround(static_cast<double>(noise) / mean_span);
    return std::make_pair(tokens - noise + spans + 1, noise + spans + 1);  // inputs, targets (each + EOS)
  };
  int64_t tokens = input_length;
  while (lengths(tokens + 1).first <= input_length) ++tokens;
  auto [inputs, targets] = lengths(tokens);
  if (noise_density == 0.5 && targets > inputs) --tokens, --targets;
  return {tokens, targets};
}

namespace {
// T5's _random_segmentation: `items` split into `segments` non-empty runs, uniformly.
std::vector<int64_t> random_segmentation(int64_t items, int64_t segments, std::mt19937_64& rng) {
  std::vector<bool> first(static_cast<size_t>(items - 1), false);
  for (int64_t i = 0; i < segments - 1; ++i) first[static_cast<size_t>(i)] = true;
  // Fisher–Yates on the boundary indicators.
  for (int64_t i = items - 2; i > 0; --i) {
    const int64_t j = uniform_int(rng, 0, i);
    const bool t = first[static_cast<size_t>(i)];
    first[static_cast<size_t>(i)] = first[static_cast<size_t>(j)];
    first[static_cast<size_t>(j)] = t;
  }
  std::vector<int64_t> lengths(1, 1);
  for (bool f : first) {
    if (f) lengths.push_back(1);
    else ++lengths.back();
  }
  return lengths;
}
}  // namespace

std::vector<bool> random_spans_noise_mask(int64_t length, double noise_density, double mean_span, std::mt19937_64& rng) {
  int64_t noise = std::llround(static_cast<double>(length) * noise_density);
  noise = std::min(std::max<int64_t>(noise, 1), length - 1);
  const int64_t spans = std::max<int64_t>(std::llround(static_cast<double>(noise) / mean_span), 1);
  const auto noise_lengths = random_segmentation(noise, spans, rng);
  const auto keep_lengths = random_segmentation(length - noise, spans, rng);
  std::vector<bool> mask;
  mask.reserve(static_cast<size_t>(length));
  for (int64_t s = 0; s < spans; ++s) {  // interleaved, starting with non-noise
    mask.insert(mask.end(), static_cast<size_t>(keep_lengths[static_cast<size_t>(s)]), false);
    mask.insert(mask.end(), static_cast<size_t>(noise_lengths[static_cast<size_t>(s)]), true);
  }
  return mask;
}

SpanCorruptionDataset::SpanCorruptionDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tok,
                                             int64_t input_length, uint64_t seed, double noise_density, double mean_span)
    : tok_(tok), stream_(corpus, document_separator(tok)), input_length_(input_length), seed_(seed),
      noise_density_(noise_density), mean_span_(mean_span) {
  check_input(tok.specials().num_sentinels > 0, "span corruption needs a tokenizer with sentinel tokens");
  check_input(input_length >= 8, "--seq-len must be at least 8 for span corruption");
  std::tie(raw_length_, target_length_) = span_corruption_lengths(input_length, noise_density, mean_span);
  const int64_t spans = std::llround(std::llround(static_cast<double>(raw_length_) * noise_density) / mean_span);
  check_input(spans <= tok.specials().num_sentinels, "--seq-len is too long: more noise spans than sentinels");
  num_examples_ = stream_.size() / raw_length_;
  check_input(num_examples_ > 0, corpus->name() + ": too short for one example of " + std::to_string(raw_length_) + " tokens");
}

Example SpanCorruptionDataset::get(int64_t index, int64_t epoch) const {
  std::vector<int32_t> raw;
  stream_.read(index * raw_length_, (index + 1) * raw_length_, raw);
  auto rng = example_rng(seed_, epoch, index);
  const auto noise = random_spans_noise_mask(raw_length_, noise_density_, mean_span_, rng);
  Example e;
  int32_t span = -1;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (noise[i]) {
      if (i == 0 || !noise[i - 1]) {
        const int32_t sentinel = tok_.sentinel(++span);
        e.input_ids.push_back(sentinel);
        e.labels.push_back(sentinel);
      }
      e.labels.push_back(raw[i]);
    } else {
      e.input_ids.push_back(raw[i]);
    }
  }
  e.input_ids.push_back(tok_.specials().eos);
  e.labels.push_back(tok_.specials().eos);
  return e;
}

// ---- causal LM ------------------------------------------------------------------------

CausalLmDataset::CausalLmDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tok, int64_t seq_len,
                                 PackingOptions packing)
    : stream_(corpus, document_separator(tok)), seq_len_(seq_len), packing_(packing) {
  check_input(seq_len >= 2, "--seq-len must be at least 2 for causal LM");
  check_input(document_separator(tok) >= 0, "causal LM needs a tokenizer with an end-of-text token");
  num_blocks_ = stream_.size() / seq_len;
  check_input(num_blocks_ > 0, corpus->name() + ": too short for one block of " + std::to_string(seq_len) + " tokens");
}

Example CausalLmDataset::get(int64_t index, int64_t) const {
  Example e;
  std::vector<int32_t> documents;
  stream_.read(index * seq_len_, (index + 1) * seq_len_, e.input_ids, packing_.any() ? &documents : nullptr);
  e.labels = e.input_ids;
  if (packing_.any()) pack_documents(e, documents, packing_, /*shifted=*/true);
  return e;
}

}  // namespace lmkit::data
