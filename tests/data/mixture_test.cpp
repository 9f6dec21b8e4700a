// Weighted mixtures: the --train syntax, each source's share in every window, each source's
// own shuffled epochs, and a draw that depends on nothing but (seed, sample).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/data/mixture.h"
#include "test_util.h"

using namespace lmkit;

namespace {

// A source whose example i of epoch e is {tag, i, e}: what a mixture drew, readable.
class TaggedSource : public data::Dataset {
 public:
  TaggedSource(int32_t tag, int64_t n) : tag_(tag), n_(n) {}
  int64_t size(int64_t) const override { return n_; }
  data::Example get(int64_t index, int64_t epoch) const override {
    data::Example e;
    e.input_ids = {tag_, static_cast<int32_t>(index), static_cast<int32_t>(epoch)};
    return e;
  }

 private:
  int32_t tag_;
  int64_t n_;
};

data::MixtureDataset tagged_mixture(uint64_t seed, int64_t period) {
  std::vector<data::MixtureSource> sources = {{"small", 0.5, std::make_shared<TaggedSource>(0, 7)},
                                              {"middle", 0.3, std::make_shared<TaggedSource>(1, 50)},
                                              {"large", 0.2, std::make_shared<TaggedSource>(2, 1000)}};
  return data::MixtureDataset(std::move(sources), seed, period);
}

}  // namespace

TEST_CASE("mixture: --train NAME=WEIGHT:PATH lists are parsed, plain paths are not, bad ones are named", "[data][mixture]") {
  auto m = data::parse_mixture("wiki=0.7:/data/wiki.txt,books=0.3:/data/books.jsonl.zst,web:/data/web");
  REQUIRE(m.size() == 3);
  CHECK(m[0].name == "wiki");
  CHECK(m[0].weight == 0.7);
  CHECK(m[0].path == "/data/wiki.txt");
  CHECK(m[1].path == "/data/books.jsonl.zst");
  CHECK(m[2].weight == 1.0);
  CHECK(data::parse_mixture("/data/train.txt").empty());
  CHECK(data::parse_mixture("runs/x/corpus").empty());
  test::TempDir dir;
  const std::string odd = dir / "a=1:b";  // an existing path is one path, whatever it looks like
  { std::ofstream(odd) << "text\n"; }
  CHECK(data::parse_mixture(odd).empty());
  CHECK_THROWS_WITH(data::parse_mixture("wiki=0:/a,books=1:/b"), Catch::Contains("source 'wiki' has weight '0'"));
  CHECK_THROWS_WITH(data::parse_mixture("wiki=x:/a"), Catch::Contains("a weight is a positive number"));
  CHECK_THROWS_WITH(data::parse_mixture("wiki=nan:/a"), Catch::Contains("a weight is a positive number"));
  CHECK_THROWS_WITH(data::parse_mixture("wiki=0x10:/a"), Catch::Contains("has weight '0x10'"));  // stod read 16
  CHECK_THROWS_WITH(data::parse_mixture("wiki= 1:/a"), Catch::Contains("has weight ' 1'"));
  CHECK(data::parse_mixture("wiki=1e-2:/a,books=3:/b")[0].weight == 0.01);
  CHECK_THROWS_WITH(data::parse_mixture("wiki=1:/a,wiki=2:/b"), Catch::Contains("'wiki' is named twice"));
  CHECK_THROWS_WITH(data::parse_mixture("wiki=1:/a,books=1:"), Catch::Contains("'books' names no PATH"));
  CHECK_THROWS_WITH(data::parse_mixture("wiki=1:/a,/b"), Catch::Contains("is not NAME=WEIGHT:PATH"));
}

TEST_CASE("mixture: every window holds each source's share, and each source runs through its own shuffled epochs",
          "[data][mixture]") {
  const int64_t period = 1000;
  const auto mix = tagged_mixture(5, period);
  const double weights[] = {0.5, 0.3, 0.2};
  const int64_t sizes[] = {7, 50, 1000};
  std::vector<data::Example> drawn;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int64_t i = 0; i < period; ++i) drawn.push_back(mix.get(i, epoch));
  }
  // Any window of N samples: each source's count within 2 of weight · N (across periods too).
  for (const int64_t n : {10, 100, 700}) {
    for (size_t start = 0; start + static_cast<size_t>(n) <= drawn.size(); start += 37) {
      int64_t counts[3] = {0, 0, 0};
      for (size_t i = start; i < start + static_cast<size_t>(n); ++i) ++counts[drawn[i].input_ids[0]];
      for (int s = 0; s < 3; ++s) {
        INFO("window of " << n << " from " << start << ", source " << s);
        REQUIRE(std::abs(static_cast<double>(counts[s]) - weights[s] * static_cast<double>(n)) <= 2.0);
      }
    }
  }
  // Each source's draws: its epochs in order, each a permutation of its examples, reshuffled.
  for (int s = 0; s < 3; ++s) {
    std::vector<std::vector<int32_t>> epochs;
    for (const auto& e : drawn) {
      if (e.input_ids[0] != s) continue;
      const auto epoch = static_cast<size_t>(e.input_ids[2]);
      REQUIRE(epoch <= epochs.size());
      if (epoch == epochs.size()) epochs.emplace_back();
      epochs[epoch].push_back(e.input_ids[1]);
    }
    for (size_t k = 0; k + 1 < epochs.size(); ++k) {  // every epoch but the last (partial) is whole
      std::vector<int32_t> sorted = epochs[k];
      std::sort(sorted.begin(), sorted.end());
      REQUIRE(sorted.size() == static_cast<size_t>(sizes[s]));
      for (int32_t i = 0; i < sizes[s]; ++i) REQUIRE(sorted[static_cast<size_t>(i)] == i);
    }
    if (s == 0) {
      REQUIRE(epochs.size() > 200);  // 1,500 draws of 7 examples
      CHECK(epochs[0] != epochs[1]);
    }
  }
  // What the first samples held, by source: counts and epochs.
  const auto d = mix.draws(2 * period + 10);
  REQUIRE(d.size() == 3);
  int64_t small = 0;
  for (size_t i = 0; i < static_cast<size_t>(2 * period + 10); ++i) small += drawn[i].input_ids[0] == 0 ? 1 : 0;
  CHECK(d[0].name == "small");
  CHECK(d[0].samples == small);
  CHECK(d[0].epochs == Approx(static_cast<double>(small) / 7.0));
  CHECK(d[2].epochs == Approx(static_cast<double>(d[2].samples) / 1000.0));
}

TEST_CASE("mixture: a sample depends only on (seed, index, epoch), not on what was drawn before", "[data][mixture]") {
  const auto a = tagged_mixture(9, 500), b = tagged_mixture(9, 500), c = tagged_mixture(10, 500);
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    for (int64_t i = 0; i < 500; ++i) order.emplace_back(i, epoch);
  }
  std::vector<std::vector<int32_t>> forward;
  for (const auto& [i, e] : order) forward.push_back(a.get(i, e).input_ids);
  std::mt19937_64 rng(1);
  data::shuffle(order, rng);  // b draws the same samples in another order (a resumed run, another rank)
  bool differs = false;
  for (const auto& [i, e] : order) {
    REQUIRE(b.get(i, e).input_ids == forward[static_cast<size_t>(e * 500 + i)]);
    differs = differs || c.get(i, e).input_ids != forward[static_cast<size_t>(e * 500 + i)];
  }
  CHECK(differs);  // another seed shuffles the sources' epochs otherwise
  CHECK_THROWS_WITH(data::MixtureDataset({{"empty", 1.0, std::make_shared<TaggedSource>(0, 0)}}, 1, 10),
                    Catch::Contains("'empty' has no examples"));
}
