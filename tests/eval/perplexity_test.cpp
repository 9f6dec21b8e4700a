#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>

#include "../data/data_fixture.h"
#include "lmkit/data/objectives.h"
#include "lmkit/eval/perplexity.h"
#include "lmkit/models/registry.h"

using namespace lmkit;

namespace {
// The first ~20 KB of the bundled validation text as a corpus: quick to score.
std::shared_ptr<const data::Corpus> small_corpus(const tokenizer::Tokenizer& tok, const test::TempDir& dir) {
  std::ifstream in(test::sample("valid.txt"));
  std::string text(20000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(text.rfind('\n') + 1);
  { std::ofstream(dir / "small.txt") << text; }
  return data::open_corpus(dir / "small.txt", tok, dir.path.string(), "small");
}

std::shared_ptr<models::Model> tiny_gpt(int64_t vocab) {
  at::manual_seed(0);
  return models::create_model({{"model_type", "gpt2"}, {"vocab_size", vocab}, {"n_embd", 32}, {"n_layer", 2},
                               {"n_head", 2}, {"n_positions", 64}},
                              "tiny.json");
}
}  // namespace

TEST_CASE("perplexity: a model with uniform output has perplexity equal to the vocabulary size", "[eval][perplexity]") {
  const auto& f = test::data_fixture("gpt2");
  test::TempDir dir;
  auto corpus = small_corpus(*f.tok, dir);
  auto model = tiny_gpt(f.tok->vocab_size());
  {
    at::NoGradGuard ng;
    for (auto& p : model->parameters()) p.zero_();  // zero embeddings and head: all logits 0
  }
  auto r = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, {32, 16, 8}, at::kCPU);
  CHECK(r["perplexity"].get<double>() == Approx(static_cast<double>(f.tok->vocab_size())).epsilon(1e-4));
  CHECK(r["tokens"].get<int64_t>() == r["stream_tokens"].get<int64_t>() - 1);  // every token but the first, once
}

TEST_CASE("perplexity: stride equal to context equals non-overlapping chunks", "[eval][perplexity]") {
  const auto& f = test::data_fixture("gpt2");
  test::TempDir dir;
  auto corpus = small_corpus(*f.tok, dir);
  auto model = tiny_gpt(f.tok->vocab_size());
  model->eval();
  const int64_t context = 48;
  auto r = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, {context, context, 4}, at::kCPU);
  // By hand: each chunk of `context` tokens scores its tokens 1.. against the ones before.
  data::PackedStream stream(corpus, f.tok->specials().eos);
  at::NoGradGuard ng;
  double nll = 0;
  int64_t count = 0;
  for (int64_t begin = 0; begin < stream.size(); begin += context) {
    std::vector<int32_t> ids;
    stream.read(begin, std::min(begin + context, stream.size()), ids);
    if (ids.size() < 2) continue;
    Batch b;
    b.input_ids = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
    b.labels = b.input_ids;
    nll += model->forward(b).loss.item<double>() * static_cast<double>(ids.size() - 1);
    count += static_cast<int64_t>(ids.size()) - 1;
  }
  CHECK(r["tokens"].get<int64_t>() == count);
  CHECK(r["loss"].get<double>() == Approx(nll / count).epsilon(1e-6));
  // Overlapping windows give every token more context: a different (finite) figure.
  auto overlapping = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, {context, context / 4, 4}, at::kCPU);
  CHECK(overlapping["tokens"].get<int64_t>() == stream.size() - 1);
  CHECK(overlapping["loss"].get<double>() != Approx(r["loss"].get<double>()).epsilon(1e-9));
}

TEST_CASE("perplexity: per-word equals per-token when every word is one token", "[eval][perplexity]") {
  const auto& f = test::data_fixture("gpt2");
  const auto& tok = *f.tok;
  test::TempDir dir;
  // Words this tokenizer keeps whole (one piece each).
  std::vector<std::string> single;
  for (const char* w : {"the", "of", "and", "in", "to", "was", "is", "for", "on", "as", "with", "by", "a", "his"}) {
    if (tok.encode(w).size() == 1) single.push_back(w);
  }
  REQUIRE(single.size() >= 3);
  std::string text;
  for (int i = 0; i < 11; ++i) text += (i ? " " : "") + single[static_cast<size_t>(i * 7 % single.size())];
  REQUIRE(tok.encode(text).size() == 11);
  { std::ofstream(dir / "t.txt") << text << "\n"; }
  auto corpus = data::open_corpus(dir / "t.txt", tok, dir.path.string(), "t");
  auto stats = eval::text_stats(dir / "t.txt");
  CHECK(stats.words == 12);  // 11 words + the document end (its EOS)
  auto model = tiny_gpt(tok.vocab_size());
  auto r = eval::causal_perplexity(*model, *corpus, tok.specials().eos, {16, 16, 1}, at::kCPU, &stats);
  CHECK(r["word_perplexity"].get<double>() == Approx(r["perplexity"].get<double>()).epsilon(1e-9));
  CHECK(r["bits_per_byte"].get<double>() == Approx(r["loss"].get<double>() * 12 / std::log(2.0) / stats.bytes));
}

TEST_CASE("perplexity: per document, each document is scored alone and its first token not at all", "[eval][perplexity]") {
  const auto& f = test::data_fixture("gpt2");
  test::TempDir dir;
  {
    std::ofstream out(dir / "docs.txt");
    const char* words[] = {"the", "river", "was", "named", "after", "a", "town", "in", "its", "valley"};
    for (int d = 0; d < 6; ++d) {
      for (int w = 0; w < 3 + 4 * d; ++w) out << words[(w * 7 + d) % 10] << (w % 5 == 4 ? ". " : " ");
      out << "\n\n";
    }
  }
  auto corpus = data::open_corpus(dir / "docs.txt", *f.tok, dir.path.string(), "docs");
  REQUIRE(corpus->num_documents() == 6);
  auto model = tiny_gpt(f.tok->vocab_size());
  model->eval();
  eval::SlidingWindow whole{64, 64, 4};
  whole.per_document = true;
  auto r = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, whole, at::kCPU);
  at::NoGradGuard ng;
  double nll = 0;
  int64_t count = 0;
  for (int64_t d = 0; d < corpus->num_documents(); ++d) {  // by hand: the document and its separator, alone
    std::vector<int32_t> ids;
    corpus->append_tokens(corpus->document_begin_token(d), corpus->document_end_token(d), ids);
    ids.push_back(f.tok->specials().eos);
    REQUIRE(ids.size() <= 64);
    Batch b;
    b.input_ids = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
    b.labels = b.input_ids;
    nll += model->forward(b).loss.item<double>() * static_cast<double>(ids.size() - 1);
    count += static_cast<int64_t>(ids.size()) - 1;
  }
  CHECK(r["documents"].get<int64_t>() == 6);
  CHECK(r["tokens"].get<int64_t>() == count);
  CHECK(r["tokens"].get<int64_t>() == r["stream_tokens"].get<int64_t>() - 6);
  CHECK(r["loss"].get<double>() == Approx(nll / count).epsilon(1e-6));
  // Shorter windows inside documents: still every token but each document's first, once.
  eval::SlidingWindow sliding{8, 4, 3};
  sliding.per_document = true;
  auto s = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, sliding, at::kCPU);
  CHECK(s["tokens"].get<int64_t>() == count);
  // The stream scores the documents' first tokens too, each from the document before.
  auto stream = eval::causal_perplexity(*model, *corpus, f.tok->specials().eos, {64, 64, 4}, at::kCPU);
  CHECK(stream["tokens"].get<int64_t>() > count);
}
