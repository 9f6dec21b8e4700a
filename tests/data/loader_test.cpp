#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <fstream>
#include <set>

#include "data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/objectives.h"
#include "lmkit/data/tasks.h"

using namespace lmkit;
using tokenizer::Family;

namespace {
std::shared_ptr<data::Dataset> mlm(uint64_t seed = 0) {
  const auto& f = test::data_fixture("bert");
  return std::make_shared<data::MaskedLmDataset>(f.corpus, *f.tok, 64, data::MaskingOptions{}, seed);
}
bool same(const Batch& a, const Batch& b) {
  auto same = [](const at::Tensor& x, const at::Tensor& y) { return x.defined() == y.defined() && (!x.defined() || at::equal(x, y)); };
  return same(a.input_ids, b.input_ids) && same(a.labels, b.labels) && same(a.attention_mask, b.attention_mask);
}
}  // namespace

TEST_CASE("loader: seeded, reproducible, and restorable from any position", "[data][loader]") {
  data::LoaderOptions o;
  o.batch_size = 8, o.seed = 3;
  auto ds = mlm();
  data::Loader a(ds, o), b(ds, o);
  std::vector<Batch> first;
  for (int i = 0; i < 5; ++i) first.push_back(a.next());
  for (int i = 0; i < 5; ++i) CHECK(same(first[i], b.next()));
  // A loader restored at position 3 continues exactly as the uninterrupted one.
  data::Loader c(ds, o, data::LoaderPosition{0, 3});
  CHECK(same(c.next(), first[3]));
  // Without prefetch: the same batches.
  o.prefetch = 0;
  data::Loader d(ds, o);
  for (int i = 0; i < 5; ++i) CHECK(same(d.next(), first[i]));
  // Another seed: another order.
  o.seed = 4;
  data::Loader e(ds, o);
  CHECK_FALSE(same(e.next(), first[0]));
}

TEST_CASE("loader: prefetching across epoch boundaries gives the batches of a loader without it", "[data][loader]") {
  // The prefetch thread builds epoch e+1's order while the caller may still ask for
  // epoch e's: each must keep its own snapshot (a torn cache broke exact resume).
  for (bool nsp : {false, true}) {
    INFO((nsp ? "mlm+nsp" : "mlm"));
    std::shared_ptr<data::Dataset> ds = mlm();
    if (nsp) {
      const auto& f = test::data_fixture("bert");
      ds = std::make_shared<data::NextSentenceDataset>(f.corpus, *f.tok, 64, data::MaskingOptions{}, 5);
    }
    data::LoaderOptions o;
    o.batch_size = 32, o.seed = 9, o.prefetch = 0;
    data::Loader reference(ds, o);
    o.prefetch = 3;
    data::Loader prefetching(ds, o);
    const int64_t steps = 3 * reference.batches_per_epoch(0) + 2;  // three epoch boundaries
    for (int64_t i = 0; i < steps; ++i) {
      INFO("batch " << i);
      REQUIRE(same(reference.next(), prefetching.next()));
    }
    CHECK(prefetching.position().epoch == 3);
  }
}

TEST_CASE("loader: epochs wrap with a new order and shards split the data", "[data][loader]") {
  auto ds = mlm();
  data::LoaderOptions o;
  o.batch_size = 16, o.prefetch = 0;
  data::Loader l(ds, o);
  const int64_t n = l.batches_per_epoch(0);
  CHECK(n == ds->size(0) / 16);
  for (int64_t i = 0; i < n; ++i) l.next();
  CHECK(l.position().epoch == 1);
  CHECK(l.position().batch == 0);
  CHECK(l.batch_indices({0, 0}) != l.batch_indices({1, 0}));

  o.world_size = 2;
  o.rank = 0;
  data::Loader r0(ds, o);
  o.rank = 1;
  data::Loader r1(ds, o);
  std::set<int64_t> seen0, seen1;
  for (int64_t i = 0; i < r0.batches_per_epoch(0); ++i) {
    for (int64_t x : r0.batch_indices({0, i})) seen0.insert(x);
    for (int64_t x : r1.batch_indices({0, i})) seen1.insert(x);
  }
  for (int64_t x : seen0) CHECK(seen1.count(x) == 0);
  CHECK(seen0.size() + seen1.size() >= static_cast<size_t>(ds->size(0) - 32));
}

TEST_CASE("loader: W ranks of batch B together hold one process's batch of W*B, epochs aligned", "[data][loader]") {
  auto ds = mlm();
  for (bool drop_last : {true, false}) {
    for (int64_t world : {2, 3, 5}) {
      INFO("world " << world << (drop_last ? ", drop_last" : ", keep the last batch"));
      data::LoaderOptions one;
      one.batch_size = 8 * world, one.seed = 11, one.prefetch = 0, one.drop_last = drop_last;
      data::Loader whole(ds, one);
      std::vector<std::unique_ptr<data::Loader>> ranks;
      for (int64_t r = 0; r < world; ++r) {
        data::LoaderOptions o = one;
        o.batch_size = 8, o.rank = r, o.world_size = world, o.prefetch = 2;
        ranks.push_back(std::make_unique<data::Loader>(ds, o));
        CHECK(ranks.back()->batches_per_epoch(0) == whole.batches_per_epoch(0));
      }
      // Every batch of an epoch and the first of the next, including a partial last one.
      const int64_t n = whole.batches_per_epoch(0);
      for (int64_t b = 0; b <= n; ++b) {
        const data::LoaderPosition p{b / n, b % n};
        std::multiset<int64_t> expected, got;
        for (int64_t x : whole.batch_indices(p)) expected.insert(x);
        for (auto& l : ranks) {
          for (int64_t x : l->batch_indices(p)) got.insert(x);
          const Batch batch = l->next();  // the prefetched batches agree with the indices
          const int64_t rows = batch.input_ids.defined() ? batch.input_ids.size(0) : 0;
          CHECK(rows == static_cast<int64_t>(l->batch_indices(p).size()));
        }
        CHECK(got == expected);
      }
    }
  }
  // A last batch smaller than the world: the ranks past it get an empty batch, not an error.
  data::LoaderOptions o;
  o.batch_size = 1, o.world_size = 4, o.drop_last = false, o.shuffle = false, o.prefetch = 0;
  const int64_t total = ds->size(0);
  o.rank = 3;
  data::Loader last(ds, o);
  const int64_t batches = last.batches_per_epoch(0);
  CHECK(batches == (total + 3) / 4);
  const int64_t tail = total % 4;
  if (tail != 0) CHECK(last.batch_indices({0, batches - 1}).empty());
}

TEST_CASE("loader: collate pads ids, masks and labels", "[data][loader]") {
  data::Example a, b;
  a.input_ids = {5, 6, 7}, a.labels = {-100, 6, -100}, a.token_type_ids = {0, 0, 1};
  b.input_ids = {8}, b.labels = {8}, b.token_type_ids = {0};
  a.row_labels = {{"next_sentence_label", 1}}, b.row_labels = {{"next_sentence_label", 0}};
  Batch batch = data::collate({a, b}, 0);
  CHECK(at::equal(batch.input_ids, at::tensor({5, 6, 7, 8, 0, 0}, at::kLong).view({2, 3})));
  CHECK(at::equal(batch.attention_mask, at::tensor({1, 1, 1, 1, 0, 0}, at::kLong).view({2, 3})));
  CHECK(at::equal(batch.labels, at::tensor({-100, 6, -100, 8, -100, -100}, at::kLong).view({2, 3})));
  CHECK(at::equal(batch.token_type_ids, at::tensor({0, 0, 1, 0, 0, 0}, at::kLong).view({2, 3})));
  CHECK(at::equal(batch.field("next_sentence_label"), at::tensor({1, 0}, at::kLong)));
  CHECK(data::collate({a, b}, 0, 5).input_ids.size(1) == 5);
  data::Example unlabelled = b;
  unlabelled.row_labels.clear();
  CHECK_THROWS_WITH(data::collate({a, unlabelled}, 0), Catch::Contains("examples of one batch differ in their labels"));
  // Nothing padded: no mask (every position is real), which lets causal attention run in the kernel.
  CHECK_FALSE(data::collate({a, a}, 0).attention_mask.defined());
  CHECK(data::collate({a, a}, 0, 4).attention_mask.defined());
  CHECK_THROWS_WITH(data::collate({a}, 0, 2), Catch::Contains("exceeds the fixed length 2"));
  // Targets of their own length (seq2seq) pad separately.
  data::Example s;
  s.input_ids = {1, 2, 3, 4}, s.labels = {9, 1};
  CHECK(data::collate({s}, 0).labels.sizes() == at::IntArrayRef({1, 2}));
}

TEST_CASE("tasks: SST-2 style TSV classification and its errors", "[data][tasks]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  { std::ofstream(dir / "train.tsv") << "sentence\tlabel\nit is good\t1\nit is bad\t0\nfine , really\t1\n"; }
  data::ColumnSpec cols;
  auto rows = data::read_labelled_rows(dir / "train.tsv", cols);
  auto map = data::make_label_map(rows);
  CHECK(map == std::map<std::string, int64_t>{{"0", 0}, {"1", 1}});
  data::ClassificationDataset ds(dir / "train.tsv", cols, *f.tok, 16, map);
  REQUIRE(ds.size(0) == 3);
  auto e = ds.get(0, 0);
  CHECK(e.class_label == 1);
  CHECK(e.input_ids.front() == f.tok->specials().cls);
  CHECK(e.input_ids.back() == f.tok->specials().sep);
  Batch b = data::collate({ds.get(0, 0), ds.get(1, 0)}, 0);
  CHECK(at::equal(b.labels, at::tensor({1, 0}, at::kLong)));

  { std::ofstream(dir / "dev.tsv") << "sentence\tlabel\nok\t1\nodd\t7\n"; }
  CHECK_THROWS_WITH(data::ClassificationDataset(dir / "dev.tsv", cols, *f.tok, 16, map),
                    Catch::Contains("dev.tsv:3: label '7' is not in the label map"));
  cols.text = "text";
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "dev.tsv", cols), Catch::Contains("dev.tsv:1: no column 'text'"));
  { std::ofstream(dir / "short.tsv") << "just text\n"; }
  data::ColumnSpec by_index;
  by_index.text = "0", by_index.label = "1";
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "short.tsv", by_index), Catch::Contains("short.tsv:1: 1 columns"));
  // CSV quoting and sentence pairs.
  { std::ofstream(dir / "pairs.csv") << "a,b,y\n\"x, quoted\",second,yes\nthird,fourth,no\n"; }
  data::ColumnSpec pairs;
  pairs.text = "a", pairs.text_pair = "b", pairs.label = "y";
  auto prow = data::read_labelled_rows(dir / "pairs.csv", pairs);
  CHECK(prow[0].text == "x, quoted");
  data::ClassificationDataset pds(dir / "pairs.csv", pairs, *f.tok, 32, data::make_label_map(prow));
  CHECK(pds.get(0, 0).token_type_ids.back() == 1);
  CHECK(pds.get(0, 0).class_label == 1);  // labels sort: no=0, yes=1
  // Numbers sort as numbers; a label 1e999 is a name (it was std::stod's out_of_range).
  CHECK(data::make_label_map({{"a", "", "10", 1}, {"b", "", "2", 2}}) == std::map<std::string, int64_t>{{"2", 0}, {"10", 1}});
  CHECK(data::make_label_map({{"a", "", "1e999", 1}, {"b", "", "2", 2}}) == std::map<std::string, int64_t>{{"1e999", 0}, {"2", 1}});
  // A UTF-8 BOM before the header does not hide the first column's name.
  { std::ofstream(dir / "bom.tsv") << "\xEF\xBB\xBFsentence\tlabel\nit is good\t1\n"; }
  CHECK(data::read_labelled_rows(dir / "bom.tsv", data::ColumnSpec{}).front().text == "it is good");
  // A column index no file has (was std::stoul's out_of_range).
  data::ColumnSpec huge;
  huge.text = "99999999999999999999", huge.label = "1";
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "short.tsv", huge),
                    Catch::Contains("column index 99999999999999999999 is beyond any row's columns"));
}

TEST_CASE("tasks: text-to-text pairs for encoder-decoder and decoder-only models", "[data][tasks][seq2seq]") {
  const auto& t5 = test::data_fixture("t5");
  const auto& gpt = test::data_fixture("gpt2");
  test::TempDir dir;
  { std::ofstream(dir / "p.jsonl") << R"({"in": "The dog ran far away from the house .", "out": "dog"})" << "\n\n"
                                   << R"({"in": "A cat .", "out": "cat"})" << "\n"; }
  data::PairSpec spec;
  spec.source = "in", spec.target = "out";
  const auto pairs = data::read_text_pairs(dir / "p.jsonl", spec);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[1].line == 3);
  data::Seq2SeqOptions o;
  o.max_source_length = 6, o.max_target_length = 8;
  const data::Seq2SeqDataset enc(pairs, "p.jsonl", *t5.tok, o);
  // The first source is cut to 5 tokens plus EOS, and counted.
  CHECK(enc.prompts()[0].size() == 6);
  CHECK(enc.prompts()[0].back() == t5.tok->specials().eos);
  CHECK(enc.truncated_sources() == 1);
  CHECK(enc.get(1, 0).labels == [&] { auto v = t5.tok->encode("cat"); v.push_back(t5.tok->specials().eos); return v; }());
  CHECK(enc.references() == std::vector<std::string>{"dog", "cat"});
  o.source_prefix = "summarize: ", o.max_source_length = 64;
  auto prefixed = t5.tok->encode("summarize: A cat .");
  prefixed.push_back(t5.tok->specials().eos);
  CHECK(data::Seq2SeqDataset(pairs, "p.jsonl", *t5.tok, o).prompts()[1] == prefixed);
  // Decoder-only: source, separator, target, EOS in one row; the loss on the target alone.
  o.decoder_only = true, o.separator = " =", o.source_prefix.clear();
  const data::Seq2SeqDataset dec(pairs, "p.jsonl", *gpt.tok, o);
  const auto e = dec.get(1, 0);
  const auto prompt = dec.prompts()[1];
  const auto sep = gpt.tok->encode(" =");
  REQUIRE(e.input_ids.size() == e.labels.size());
  CHECK(std::equal(sep.begin(), sep.end(), prompt.end() - static_cast<std::ptrdiff_t>(sep.size())));
  CHECK(std::vector<int32_t>(e.input_ids.begin(), e.input_ids.begin() + static_cast<std::ptrdiff_t>(prompt.size())) == prompt);
  for (size_t i = 0; i < e.labels.size(); ++i) CHECK(e.labels[i] == (i < prompt.size() ? -100 : e.input_ids[i]));
  CHECK(e.input_ids.back() == gpt.tok->specials().eos);
  // An empty target is named with its line.
  { std::ofstream(dir / "empty.tsv") << "source\ttarget\nA dog .\tdog\nA cat .\t \n"; }
  CHECK_THROWS_WITH(data::Seq2SeqDataset(data::read_text_pairs(dir / "empty.tsv", {}), dir / "empty.tsv", *t5.tok, {}),
                    Catch::EndsWith("empty.tsv:3: empty target"));
}

TEST_CASE("tasks: Multi30k-style parallel files", "[data][tasks]") {
  const auto& f = test::data_fixture("t5");
  test::TempDir dir;
  { std::ofstream(dir / "s.de") << "Ein Hund .\nZwei Katzen .\n"; }
  { std::ofstream(dir / "s.en") << "A dog .\nTwo cats .\n"; }
  { std::ofstream(dir / "bad.en") << "A dog .\n"; }
  data::Seq2SeqDataset ds(dir / "s.de", dir / "s.en", *f.tok, 16, 16);
  CHECK(ds.size(0) == 2);
  CHECK(ds.get(0, 0).labels.back() == f.tok->specials().eos);
  CHECK(f.tok->decode(ds.get(1, 0).labels) == "Two cats .");
  CHECK_THROWS_WITH(data::Seq2SeqDataset(dir / "s.de", dir / "bad.en", *f.tok, 16, 16),
                    Catch::Contains("must align line by line"));
}
