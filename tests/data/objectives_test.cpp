#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <fstream>
#include <random>
#include <set>

#include "data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/objectives.h"
#include "lmkit/data/pipeline.h"

using namespace lmkit;

TEST_CASE("mlm: 15% of non-special positions chosen and 80/10/10 over 100k+ tokens", "[data][mlm]") {
  const auto& f = test::data_fixture("bert");
  const auto& tok = *f.tok;
  data::MaskedLmDataset ds(f.corpus, tok, 128, {}, 7);
  int64_t candidates = 0, chosen = 0, masked = 0, random = 0, kept = 0, tokens = 0;
  for (int64_t i = 0; i < ds.size(0); ++i) {
    auto e = ds.get(i, 0);
    REQUIRE(e.input_ids.size() == 128);
    CHECK(e.input_ids.front() == tok.specials().cls);
    for (size_t j = 0; j < e.input_ids.size(); ++j) {
      const int32_t in = e.input_ids[j], label = e.labels[j];
      const int32_t original = label >= 0 ? label : in;
      ++tokens;
      if (tok.is_special(original)) {
        REQUIRE(label == -100);  // specials are never chosen
        continue;
      }
      ++candidates;
      if (label < 0) continue;
      ++chosen;
      if (in == tok.specials().mask) ++masked;
      else if (in != label) {
        ++random;
        REQUIRE_FALSE(tok.is_special(in));  // random replacements are regular tokens
      } else ++kept;
    }
  }
  REQUIRE(tokens >= 100000);
  const double rate = static_cast<double>(chosen) / candidates;
  INFO("chosen " << rate << " mask " << double(masked) / chosen << " random " << double(random) / chosen << " kept "
                 << double(kept) / chosen);
  CHECK(std::abs(rate - 0.15) <= 0.005);
  CHECK(std::abs(double(masked) / chosen - 0.8) <= 0.015);
  CHECK(std::abs(double(random) / chosen - 0.1) <= 0.015);
  CHECK(std::abs(double(kept) / chosen - 0.1) <= 0.015);
}

TEST_CASE("mlm: same seed gives the same masks and a new epoch new ones", "[data][mlm]") {
  const auto& f = test::data_fixture("bert");
  data::MaskedLmDataset a(f.corpus, *f.tok, 64, {}, 1), b(f.corpus, *f.tok, 64, {}, 1), c(f.corpus, *f.tok, 64, {}, 2);
  CHECK(a.get(5, 0).labels == b.get(5, 0).labels);
  CHECK(a.get(5, 0).input_ids == b.get(5, 0).input_ids);
  CHECK(a.get(5, 0).labels != a.get(5, 1).labels);
  CHECK(a.get(5, 0).labels != c.get(5, 0).labels);
}

TEST_CASE("mlm: whole-word masking chooses whole words only", "[data][mlm]") {
  const auto& f = test::data_fixture("bert");
  const auto& tok = *f.tok;
  data::MaskingOptions o;
  o.whole_word = true;
  data::MaskedLmDataset ds(f.corpus, tok, 128, o, 3);
  int64_t words_checked = 0;
  for (int64_t i = 0; i < 200; ++i) {
    auto e = ds.get(i, 0);
    std::vector<int32_t> original(e.input_ids.size());
    for (size_t j = 0; j < original.size(); ++j) original[j] = e.labels[j] >= 0 ? e.labels[j] : e.input_ids[j];
    // Every word is either wholly chosen or wholly not.
    for (size_t j = 1; j < original.size(); ++j) {
      if (tok.is_special(original[j]) || tok.starts_word(original[j]) || tok.is_special(original[j - 1])) continue;
      REQUIRE((e.labels[j] >= 0) == (e.labels[j - 1] >= 0));
      ++words_checked;
    }
  }
  CHECK(words_checked > 1000);
}

TEST_CASE("nsp: half the pairs are IsNext and a random B never comes from A's document", "[data][nsp]") {
  const auto& f = test::data_fixture("bert");
  const auto& c = *f.corpus;
  data::NextSentenceDataset ds(f.corpus, *f.tok, 128, {}, 11);
  auto doc_of = [&](int64_t sentence) {
    int64_t d = 0;
    while (c.document_end_sentence(d) <= sentence) ++d;
    return d;
  };
  int64_t pairs = 0, is_next = 0;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    for (const auto& p : *ds.plan(epoch)) {
      ++pairs;
      REQUIRE(p.a_end > p.a_begin);
      REQUIRE(p.b_end > p.b_begin);
      if (p.random_next) {
        REQUIRE(doc_of(p.b_begin) != doc_of(p.a_begin));
      } else {
        ++is_next;
        REQUIRE(p.b_begin == p.a_end);  // the actual continuation
        REQUIRE(doc_of(p.b_end - 1) == doc_of(p.a_begin));
      }
    }
  }
  INFO("IsNext " << double(is_next) / pairs << " over " << pairs << " pairs");
  CHECK(std::abs(double(is_next) / pairs - 0.5) <= 0.02);
  // Every example fits, is [CLS] A [SEP] B [SEP] with token types 0 then 1.
  for (int64_t i = 0; i < ds.size(0); ++i) {
    auto e = ds.get(i, 0);
    REQUIRE(e.input_ids.size() <= 128);
    REQUIRE(e.input_ids.front() == f.tok->specials().cls);
    REQUIRE(e.input_ids.back() == f.tok->specials().sep);
    REQUIRE(e.token_type_ids.front() == 0);
    REQUIRE(e.token_type_ids.back() == 1);
    REQUIRE(e.row_labels.size() == 1);
    REQUIRE(e.row_labels[0].first == "next_sentence_label");
    REQUIRE(e.row_labels[0].second == ((*ds.plan(0))[static_cast<size_t>(i)].random_next ? 1 : 0));
  }
  // Short documents (2 to 4 sentences, PTB-like): the coin still decides, not the
  // document's end (a forced random B at every document's last sentence gave 44%).
  test::TempDir dir;
  {
    std::ofstream out(dir / "short.txt");
    const std::vector<std::string> words = {"the", "market", "fell", "today", "as", "traders", "sold", "shares",
                                            "of", "banks", "and", "oil", "firms", "after", "news"};
    std::mt19937 rng(3);
    for (int d = 0; d < 400; ++d) {
      for (int s = 0, n = 2 + static_cast<int>(rng() % 3); s < n; ++s) {
        out << "Sentence " << s << " says";
        for (int w = 0, k = 4 + static_cast<int>(rng() % 8); w < k; ++w) out << ' ' << words[rng() % words.size()];
        out << ". ";
      }
      out << "\n\n";
    }
  }
  data::encode_corpus(*f.tok, {{dir / "short.txt"}, data::TextFormat::kAuto, "text", dir / "short", 1});
  data::NextSentenceDataset short_docs(std::make_shared<const data::Corpus>(dir / "short"), *f.tok, 128, {}, 5);
  int64_t short_pairs = 0, short_next = 0;
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    for (const auto& p : *short_docs.plan(epoch)) ++short_pairs, short_next += p.random_next ? 0 : 1;
  }
  INFO("IsNext " << double(short_next) / short_pairs << " over " << short_pairs << " pairs of short documents");
  CHECK(short_pairs > 2000);
  CHECK(std::abs(double(short_next) / short_pairs - 0.5) <= 0.02);
  const auto plan0 = ds.plan(0), plan1 = ds.plan(1);
  const bool repaired = plan0->size() != plan1->size() || (*plan0)[3].a_end != (*plan1)[3].a_end ||
                        (*plan0)[3].b_begin != (*plan1)[3].b_begin;
  CHECK(repaired);  // re-paired each epoch
}

TEST_CASE("span: T5 lengths and 0.15 noise in spans of mean 3 and exact reconstruction", "[data][span]") {
  const auto t5_512 = data::span_corruption_lengths(512, 0.15, 3.0);
  CHECK(t5_512.first == 568);
  CHECK(t5_512.second == 114);
  const auto t5_128 = data::span_corruption_lengths(128, 0.15, 3.0);
  CHECK(t5_128.first == 141);  // 21 noise tokens in 7 spans: 120 + 7 + 1 inputs, 21 + 7 + 1 targets
  CHECK(t5_128.second == 29);
  const auto& f = test::data_fixture("t5");
  const auto& tok = *f.tok;
  data::SpanCorruptionDataset ds(f.corpus, tok, 128, 5);
  data::PackedStream stream(f.corpus, tok.specials().eos);
  int64_t noise = 0, raw = 0, spans = 0;
  for (int64_t i = 0; i < ds.size(0); ++i) {
    auto e = ds.get(i, 0);
    REQUIRE(e.input_ids.size() == 128);
    REQUIRE(static_cast<int64_t>(e.labels.size()) == ds.target_length());
    std::vector<int32_t> original;
    stream.read(i * ds.raw_length(), (i + 1) * ds.raw_length(), original);
    // Rebuild the original: each sentinel in the input takes the tokens after it in the target.
    std::vector<int32_t> rebuilt, sentinels;
    size_t t = 0;
    for (size_t j = 0; j + 1 < e.input_ids.size(); ++j) {
      const int32_t id = e.input_ids[j];
      if (id >= tok.sentinel(99)) {
        sentinels.push_back(id);
        REQUIRE(e.labels[t] == id);
        // A span runs to the next sentinel or the final </s> (spans may hold document separators).
        for (++t; t + 1 < e.labels.size() && e.labels[t] < tok.sentinel(99); ++t) {
          rebuilt.push_back(e.labels[t]);
          ++noise;
        }
        ++spans;
      } else {
        rebuilt.push_back(id);
      }
    }
    REQUIRE(rebuilt == original);
    REQUIRE(e.labels.back() == tok.specials().eos);
    for (size_t s = 1; s < sentinels.size(); ++s) REQUIRE(sentinels[s] == sentinels[s - 1] - 1);  // distinct, descending
    REQUIRE(sentinels.front() == tok.sentinel(0));
    raw += ds.raw_length();
  }
  REQUIRE(raw >= 100000);
  INFO("noise " << double(noise) / raw << " mean span " << double(noise) / spans);
  CHECK(std::abs(double(noise) / raw - 0.15) <= 0.01);
  CHECK(std::abs(double(noise) / spans - 3.0) <= 0.15);
}

TEST_CASE("clm: blocks cover the corpus in order with a separator after each document", "[data][clm]") {
  const auto& f = test::data_fixture("gpt2");
  const auto& c = *f.corpus;
  data::CausalLmDataset ds(f.corpus, *f.tok, 64);
  std::vector<int32_t> all;
  for (int64_t i = 0; i < ds.size(0); ++i) {
    auto e = ds.get(i, 0);
    REQUIRE(e.labels == e.input_ids);
    all.insert(all.end(), e.input_ids.begin(), e.input_ids.end());
  }
  std::vector<int32_t> expected;
  for (int64_t d = 0; d < c.num_documents(); ++d) {
    c.append_tokens(c.document_begin_token(d), c.document_end_token(d), expected);
    expected.push_back(f.tok->specials().eos);
  }
  REQUIRE(all.size() == static_cast<size_t>(ds.size(0) * 64));
  REQUIRE(expected.size() >= all.size());
  CHECK(std::equal(all.begin(), all.end(), expected.begin()));
  CHECK(expected.size() - all.size() < 64);  // only the last partial block is dropped
}

TEST_CASE("objectives: wrong tokenizer families and tiny corpora are input errors", "[data][objectives]") {
  const auto& bert = test::data_fixture("bert");
  const auto& gpt = test::data_fixture("gpt2");
  CHECK_THROWS_WITH(data::MaskedLmDataset(gpt.corpus, *gpt.tok, 64, {}, 0), Catch::Contains("needs a tokenizer with cls and mask tokens"));
  CHECK_THROWS_WITH(data::SpanCorruptionDataset(bert.corpus, *bert.tok, 64, 0), Catch::Contains("needs a tokenizer with sentinel tokens"));
  CHECK_THROWS_WITH(data::CausalLmDataset(bert.corpus, *bert.tok, 10000000), Catch::Contains("too short"));
}

TEST_CASE("clm and mlm with the document mask: ids per document, positions restart, no target across a boundary",
          "[data][packing]") {
  const auto& f = test::data_fixture("gpt2");
  const auto& c = *f.corpus;
  const int32_t eos = f.tok->specials().eos;
  data::PackingOptions packing;
  packing.document_mask = packing.reset_positions = true;
  data::CausalLmDataset plain(f.corpus, *f.tok, 64), packed(f.corpus, *f.tok, 64, packing);
  int64_t boundaries = 0;
  for (int64_t i = 0; i < packed.size(0); ++i) {
    const auto p = plain.get(i, 0), e = packed.get(i, 0);
    REQUIRE(e.input_ids == p.input_ids);
    REQUIRE(e.document_ids.size() == e.input_ids.size());
    REQUIRE(e.position_ids.size() == e.input_ids.size());
    CHECK(e.document_ids[0] == 0);
    CHECK(e.position_ids[0] == 0);
    for (size_t t = 1; t < e.input_ids.size(); ++t) {
      // A new document starts right after a separator, and only there.
      const bool starts = e.input_ids[t - 1] == eos;
      REQUIRE(e.document_ids[t] == e.document_ids[t - 1] + (starts ? 1 : 0));
      REQUIRE(e.position_ids[t] == (starts ? 0 : e.position_ids[t - 1] + 1));
      REQUIRE(e.labels[t] == (starts ? -100 : p.labels[t]));  // the first token of a document is no target
      boundaries += starts ? 1 : 0;
    }
  }
  // Every separator but those that end a block (or the dropped tail) starts a document inside one.
  CHECK(boundaries >= c.num_documents() - packed.size(0) / 10);
  CHECK(boundaries > 0);

  const auto& b = test::data_fixture("bert");
  packing.first_position = 2;  // RoBERTa's padding_idx + 1
  data::MaskedLmDataset mlm(b.corpus, *b.tok, 64, {}, 3, packing), mlm_plain(b.corpus, *b.tok, 64, {}, 3);
  for (int64_t i = 0; i < 50; ++i) {
    const auto e = mlm.get(i, 1), p = mlm_plain.get(i, 1);
    REQUIRE(e.input_ids == p.input_ids);
    REQUIRE(e.labels == p.labels);  // masked LM labels are not shifted: none crosses a boundary
    CHECK(e.document_ids.front() == 0);
    CHECK(e.position_ids.front() == 2);
    CHECK(e.document_ids.back() == e.document_ids[e.document_ids.size() - 2]);  // the last [SEP] closes the last document
    for (size_t t = 1; t + 1 < e.input_ids.size(); ++t) {
      const bool starts = e.input_ids[t - 1] == b.tok->specials().sep;
      REQUIRE(e.document_ids[t] == e.document_ids[t - 1] + (starts ? 1 : 0));
      REQUIRE(e.position_ids[t] == (starts ? 2 : e.position_ids[t - 1] + 1));
    }
  }
  // Positions alone, without the mask: documents still see each other and every target stays.
  data::PackingOptions positions_only;
  positions_only.reset_positions = true;
  const auto e = data::CausalLmDataset(f.corpus, *f.tok, 64, positions_only).get(3, 0);
  CHECK(e.document_ids.empty());
  CHECK(e.labels == plain.get(3, 0).labels);
  CHECK(e.position_ids.size() == 64);
  // The loader carries both into the batch: padding in a document of its own.
  auto short_row = packed.get(0, 0);
  short_row.input_ids.resize(10);
  short_row.labels.resize(10);
  short_row.document_ids.resize(10);
  short_row.position_ids.resize(10);
  const Batch batch = data::collate({packed.get(1, 0), short_row}, 0);
  REQUIRE(batch.field(kDocumentIds).sizes() == at::IntArrayRef({2, 64}));
  CHECK(batch.field(kDocumentIds)[1][20].item<int64_t>() == -1);
  CHECK(batch.field(kPositionIds)[1][20].item<int64_t>() == 0);
}

TEST_CASE("objectives: --document-mask on an objective that does not pack documents is refused by name", "[data][packing]") {
  const auto& b = test::data_fixture("bert");
  data::ObjectiveInputs in;
  in.corpus = b.corpus;
  in.tokenizer = b.tok.get();
  in.packing.document_mask = true;
  CHECK_THROWS_WITH(data::objective("mlm+nsp").dataset(in), Catch::Contains("not mlm+nsp") && Catch::Contains("clm"));
  CHECK_NOTHROW(data::objective("mlm").dataset(in));
}
