// Token classification: seqeval's entity scores (against seqeval's own outputs),
// the CoNLL / JSONL readers, the word-to-subword alignment and its windows.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "../data/data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/token_tasks.h"
#include "lmkit/eval/token_classification.h"

using namespace lmkit;

namespace {

using Tags = std::vector<std::vector<std::string>>;

std::string ner(const std::string& name) { return test::source_dir() + "/tests/fixtures/ner/" + name; }

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("seqeval: entities as its default mode reads IOB1, IOB2 and IOBES", "[seqeval]") {
  // An I- after O or after another type starts an entity (IOB1); B- always starts one.
  const auto e = eval::get_entities({{"I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"}, {"B-PER", "E-PER", "S-LOC"}});
  Json got = Json::array();
  for (const auto& x : e) got.push_back({x.type, x.begin, x.end});
  // Offsets count over the sentences joined with an O between them (seqeval's).
  const Json want = Json::parse(R"([["PER", 0, 1], ["LOC", 3, 3], ["LOC", 4, 4], ["ORG", 5, 5], ["PER", 7, 8], ["LOC", 9, 9]])");
  CHECK(got == want);
  const Json s = eval::entity_scores({{"B-PER", "I-PER", "O", "B-LOC"}}, {{"B-PER", "I-PER", "O", "B-ORG"}});
  CHECK(s["precision"].get<double>() == Approx(0.5));
  CHECK(s["recall"].get<double>() == Approx(0.5));
  CHECK(s["f1"].get<double>() == Approx(0.5));
  CHECK(s["accuracy"].get<double>() == Approx(0.75));
  CHECK(s["per_type"]["ORG"]["support"] == 0);  // predicted only: listed, as seqeval's report lists it
  CHECK(s["per_type"]["ORG"]["precision"].get<double>() == 0.0);
}

TEST_CASE("seqeval: every case equals seqeval 1.2.2's get_entities, scores and report", "[seqeval]") {
  // The committed cases, or fresh ones from tests/interop/seqeval_cases.py (CTest: seqeval parity).
  const char* env = std::getenv("LMKIT_SEQEVAL_CASES");
  const std::string path = env ? env : test::source_dir() + "/tests/fixtures/seqeval/cases.json";
  const Json cases = load_json_file(path);
  REQUIRE(cases.size() >= 100);
  int64_t entities = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(path << " case " << i);
    const Json& c = cases[i];
    const Tags gold = c["gold"].get<Tags>(), pred = c["predicted"].get<Tags>();
    Json want_entities = Json::array();
    for (const auto& e : eval::get_entities(gold)) want_entities.push_back({e.type, e.begin, e.end});
    CHECK(want_entities == c["gold_entities"]);
    entities += static_cast<int64_t>(want_entities.size());
    const Json s = eval::entity_scores(gold, pred);
    for (const char* key : {"precision", "recall", "f1", "accuracy"}) {
      CHECK(s[key].get<double>() == Approx(c[key].get<double>()).margin(1e-12));
    }
    CHECK(s["per_type"].size() == c["per_type"].size());
    for (auto it = c["per_type"].begin(); it != c["per_type"].end(); ++it) {
      INFO("type " << it.key());
      REQUIRE(s["per_type"].contains(it.key()));
      const Json& got = s["per_type"][it.key()];
      for (const char* key : {"precision", "recall", "f1"}) {
        CHECK(got[key].get<double>() == Approx(it.value()[key].get<double>()).margin(1e-12));
      }
      CHECK(got["support"] == it.value()["support"]);
    }
  }
  CHECK(entities > 300);
}

TEST_CASE("token classification: CoNLL and JSONL read the same sentences and bad lines are named", "[tokcls]") {
  const auto conll = data::read_tagged_sentences(ner("dev.conll"), {});
  const auto jsonl = data::read_tagged_sentences(ner("dev.jsonl"), {});
  REQUIRE(conll.size() == 60);  // -DOCSTART- skipped
  REQUIRE(jsonl.size() == conll.size());
  for (size_t i = 0; i < conll.size(); ++i) {
    CHECK(conll[i].words == jsonl[i].words);
    CHECK(conll[i].tags == jsonl[i].tags);
  }
  CHECK(conll[0].line == 3);
  const auto tags = data::make_tag_map(data::read_tagged_sentences(ner("train.conll"), {}));
  CHECK(tags.size() == 8);  // O, B-/I- of PER, LOC, ORG, and B-MISC (one-word names)
  CHECK(tags.begin()->first == "B-LOC");

  test::TempDir dir;
  write(dir / "short.conll", "John B-PER\nlives O\nhere\n");
  CHECK_THROWS_WITH(data::read_tagged_sentences(dir / "short.conll", {}), Catch::Contains("short.conll:3: 1 column(s)"));
  data::TaggedFormat third;
  third.tag_column = 3;
  write(dir / "three.conll", "John NN B-NP B-PER\nlives VB B-VP\n");
  CHECK_THROWS_WITH(data::read_tagged_sentences(dir / "three.conll", third), Catch::Contains("three.conll:2"));
  write(dir / "bad.jsonl", "{\"tokens\": [\"a\", \"b\"], \"tags\": [\"O\"]}\n");
  CHECK_THROWS_WITH(data::read_tagged_sentences(dir / "bad.jsonl", {}), Catch::Contains("bad.jsonl:1: 2 tokens but 1 tags"));
  write(dir / "empty.conll", "-DOCSTART- -X- -X- O\n\n");
  CHECK_THROWS_WITH(data::read_tagged_sentences(dir / "empty.conll", {}), Catch::Contains("no tagged sentences"));
}

TEST_CASE("token classification: tags on first subwords, windows of whole words, nothing cut", "[tokcls]") {
  for (const std::string family : {"bert", "t5"}) {
    INFO(family);
    const auto& tok = *test::data_fixture(family).tok;
    auto sentences = data::read_tagged_sentences(ner("train.conll"), {});
    const auto tag_map = data::make_tag_map(sentences);
    for (const int64_t max_length : {8, 128}) {
      INFO("max_length " << max_length);
      data::TokenTaskOptions o;
      o.max_length = max_length;
      const data::TokenClassificationDataset ds(sentences, "train.conll", tok, tag_map, o);
      std::vector<std::vector<int>> covered(sentences.size());
      for (size_t s = 0; s < sentences.size(); ++s) covered[s].assign(sentences[s].words.size(), 0);
      for (int64_t i = 0; i < ds.size(0); ++i) {
        const data::Example e = ds.get(i, 0);
        const data::WordWindow& w = ds.windows()[static_cast<size_t>(i)];
        CHECK(static_cast<int64_t>(e.input_ids.size()) <= max_length);
        REQUIRE(e.labels.size() == e.input_ids.size());
        int64_t labelled = 0;
        for (int32_t l : e.labels) labelled += l != -100;
        CHECK(labelled == static_cast<int64_t>(w.positions.size()));  // one label per word
        for (size_t k = 0; k < w.positions.size(); ++k) {
          const auto& s = sentences[static_cast<size_t>(w.sentence)];
          const size_t word = static_cast<size_t>(w.first_word) + k;
          ++covered[static_cast<size_t>(w.sentence)][word];
          CHECK(e.labels[static_cast<size_t>(w.positions[k])] == tag_map.at(s.tags[word]));
          const auto pieces = data::encode_word(tok, s.words[word]);
          CHECK(e.input_ids[static_cast<size_t>(w.positions[k])] == pieces[0]);
        }
      }
      for (const auto& s : covered) {
        for (int c : s) CHECK(c == 1);  // every word in exactly one window
      }
      if (max_length == 128) CHECK(ds.size(0) == static_cast<int64_t>(sentences.size()));
      if (max_length == 8) CHECK(ds.size(0) > static_cast<int64_t>(sentences.size()));
    }
  }
}

TEST_CASE("token classification: every subword labelled continues B-X as I-X", "[tokcls]") {
  const auto& tok = *test::data_fixture("bert").tok;
  const std::vector<data::TaggedSentence> s = {{{"Bluefern", "Bank", "opened"}, {"B-ORG", "I-ORG", "O"}, 1, {}}};
  const std::map<std::string, int64_t> tags = {{"B-ORG", 0}, {"I-ORG", 1}, {"O", 2}};
  data::TokenTaskOptions o;
  o.label_all_subwords = true;
  const data::TokenClassificationDataset all(s, "x", tok, tags, o);
  const auto first = data::encode_word(tok, "Bluefern");
  REQUIRE(first.size() >= 2);  // a word the 2000-piece vocabulary splits
  const auto labels = all.get(0, 0).labels;
  const int64_t at = all.windows()[0].positions[0];
  CHECK(labels[static_cast<size_t>(at)] == 0);
  CHECK(labels[static_cast<size_t>(at) + 1] == 1);  // B-ORG's later subwords: I-ORG
  o.label_all_subwords = false;
  const data::TokenClassificationDataset first_only(s, "x", tok, tags, o);
  CHECK(first_only.get(0, 0).labels[static_cast<size_t>(at) + 1] == -100);
}

TEST_CASE("token classification: a tag outside the training tags, a word longer than a window", "[tokcls]") {
  const auto& tok = *test::data_fixture("bert").tok;
  const std::map<std::string, int64_t> tags = {{"B-PER", 0}, {"O", 1}};
  const std::vector<data::TaggedSentence> unseen = {{{"Paris"}, {"B-LOC"}, 7, {}}};
  CHECK_THROWS_WITH(data::TokenClassificationDataset(unseen, "dev.conll", tok, tags, {}),
                    Catch::Contains("dev.conll:7: tag 'B-LOC'") && Catch::Contains("not among the training tags"));
  const std::vector<data::TaggedSentence> long_word = {{{"Supercalifragilisticexpialidocious"}, {"O"}, 3, {}}};
  data::TokenTaskOptions o;
  o.max_length = 4;  // [CLS] and [SEP] leave 2
  CHECK_THROWS_WITH(data::TokenClassificationDataset(long_word, "dev.conll", tok, tags, o),
                    Catch::Contains("dev.conll:3: the word 'Supercalifragilisticexpialidocious'") &&
                        Catch::Contains("leaves 2 per window"));
}
