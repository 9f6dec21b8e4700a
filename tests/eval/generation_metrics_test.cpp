// Text-to-text metrics against their reference libraries' own outputs (sacreBLEU,
// rouge-score, SQuAD v1.1's evaluate script): tests/interop/generation_metrics.py.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/eval/porter.h"
#include "test_util.h"

using namespace lmkit;

TEST_CASE("generation metrics: SQuAD normalisation, ROUGE tokens and the corpus figures", "[genmetrics]") {
  CHECK(eval::squad_normalize("The  Cat, sat on a mat!") == "cat sat on mat");
  CHECK(eval::squad_normalize("theme anthem") == "theme anthem");  // articles are whole words only
  CHECK(eval::squad_exact_match("A cat.", "the CAT") == 1.0);
  CHECK(eval::squad_f1("cat sat", "the cat sat down") == Approx(2 * 1.0 * (2.0 / 3) / (1 + 2.0 / 3)));
  CHECK(eval::squad_f1("", "") == 0.0);  // v1.1: no shared token, no credit
  CHECK(eval::rouge_tokenize("Don't stop—café 42!") == std::vector<std::string>{"don", "t", "stop", "caf", "42"});
  // The stemmer touches words longer than three characters only ("are" stays, "the" stays).
  CHECK(eval::rouge_tokenize("Running dogs generalizations are the skies", true) ==
        std::vector<std::string>{"run", "dog", "gener", "are", "the", "sky"});
  CHECK(eval::generation_scores({"dogs running"}, {"the dog runs"}, true).rouge1 == Approx(100 * 2 * (1.0 * 2 / 3) / (1 + 2.0 / 3)));
  CHECK(eval::generation_scores({"dogs running"}, {"the dog runs"}).rouge1 == 0.0);
  const auto l = eval::rouge_l({"a", "b", "c", "d"}, {"a", "c", "x"});
  CHECK(l.precision == Approx(2.0 / 3));
  CHECK(l.recall == Approx(0.5));
  const auto s = eval::generation_scores({"positive", "negative"}, {"positive", "positive"});
  CHECK(s.exact_match == 50.0);
  CHECK(s.rouge1 == 50.0);
  CHECK(s.examples == 2);
  CHECK_THROWS_WITH(eval::generation_scores({"a"}, {}), Catch::Contains("1 predictions but 0 references"));
}

TEST_CASE("generation metrics: every case equals sacreBLEU 2.6.0, rouge-score 0.1.2 and SQuAD v1.1", "[genmetrics]") {
  // The committed cases, or fresh ones (CTest: generation metric parity).
  const char* env = std::getenv("LMKIT_GENERATION_CASES");
  const std::string path = env ? env : test::source_dir() + "/tests/fixtures/generation/cases.json";
  const Json sets = load_json_file(path);
  REQUIRE(sets.size() >= 20);
  int64_t pairs = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    const Json& set = sets[i];
    const auto predictions = set["predictions"].get<std::vector<std::string>>();
    const auto references = set["references"].get<std::vector<std::string>>();
    for (size_t k = 0; k < predictions.size(); ++k, ++pairs) {
      INFO(path << " set " << i << " pair " << k << ": '" << predictions[k] << "' against '" << references[k] << "'");
      const Json& want = set["pairs"][k];
      CHECK(eval::squad_exact_match(predictions[k], references[k]) == want["exact_match"].get<double>());
      CHECK(eval::squad_f1(predictions[k], references[k]) == Approx(want["f1"].get<double>()).margin(1e-12));
      for (const bool stem : {false, true}) {
        const std::string suffix = stem ? "_stemmed" : "";
        if (!want.contains("rouge1" + suffix)) continue;
        const auto t = eval::rouge_tokenize(references[k], stem), p = eval::rouge_tokenize(predictions[k], stem);
        const eval::RougeScore got[] = {eval::rouge_n(t, p, 1), eval::rouge_n(t, p, 2), eval::rouge_l(t, p)};
        const char* keys[] = {"rouge1", "rouge2", "rougeL"};
        for (int r = 0; r < 3; ++r) {
          const auto w = want[keys[r] + suffix].get<std::vector<double>>();
          INFO(keys[r] << suffix);
          CHECK(got[r].precision == Approx(w[0]).margin(1e-12));
          CHECK(got[r].recall == Approx(w[1]).margin(1e-12));
          CHECK(got[r].fmeasure == Approx(w[2]).margin(1e-12));
        }
      }
    }
    INFO(path << " set " << i);
    CHECK(eval::corpus_bleu(predictions, {references}).bleu == Approx(set["bleu"].get<double>()).margin(1e-9));
    const auto s = eval::generation_scores(predictions, references);
    const Json& c = set["corpus"];
    CHECK(s.exact_match == Approx(c["exact_match"].get<double>()).margin(1e-9));
    CHECK(s.f1 == Approx(c["f1"].get<double>()).margin(1e-9));
    CHECK(s.rouge1 == Approx(c["rouge1"].get<double>()).margin(1e-9));
    CHECK(s.rouge2 == Approx(c["rouge2"].get<double>()).margin(1e-9));
    CHECK(s.rougeL == Approx(c["rougeL"].get<double>()).margin(1e-9));
  }
  CHECK(pairs >= 200);
}

TEST_CASE("generation metrics: the Porter stemmer equals NLTK's PorterStemmer() on every word", "[genmetrics]") {
  // The committed words (tests/interop/generation_metrics.py stems --seed 1), or fresh ones (CTest).
  const char* env = std::getenv("LMKIT_PORTER_CASES");
  const std::string path = env ? env : test::source_dir() + "/tests/fixtures/generation/porter.json";
  const Json cases = load_json_file(path);
  REQUIRE(cases["stems"].size() >= 2000);
  int64_t differ = 0;
  for (auto it = cases["stems"].begin(); it != cases["stems"].end(); ++it) {
    const std::string got = eval::porter_stem(it.key());
    if (got == it.value().get<std::string>()) continue;
    if (++differ <= 20) FAIL_CHECK(it.key() << ": lmkit " << got << ", NLTK " << it.value().get<std::string>());
  }
  CHECK(differ == 0);
}
