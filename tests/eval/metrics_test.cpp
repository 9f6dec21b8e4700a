#include <catch2/catch.hpp>

#include <cmath>

#include "lmkit/eval/metrics.h"

using namespace lmkit::eval;

TEST_CASE("metrics: accuracy and macro-F1 and MCC against hand-computed cases", "[eval][metrics]") {
  // Binary: TP=3 FN=1 FP=1 TN=3.
  auto s = classification_scores({1, 1, 1, 1, 0, 0, 0, 0}, {1, 1, 1, 0, 1, 0, 0, 0});
  CHECK(s.accuracy == Approx(0.75));
  CHECK(s.macro_f1 == Approx(0.75));                     // F1 of both classes = 0.75
  CHECK(s.mcc == Approx((3.0 * 3 - 1 * 1) / std::sqrt(4.0 * 4 * 4 * 4)));  // (TP·TN − FP·FN)/sqrt(...) = 0.5
  CHECK(s.positive_f1 == Approx(0.75));
  // Every prediction in one class: MCC is undefined and reported as 0; F1 averages the classes present.
  auto one = classification_scores({1, 0, 1, 0}, {1, 1, 1, 1});
  CHECK(one.accuracy == Approx(0.5));
  CHECK(one.mcc == 0.0);
  CHECK(one.macro_f1 == Approx((2.0 * 2 / (2 + 4) + 0.0) / 2));
  CHECK(one.positive_f1 == Approx(2.0 * 2 / (2 + 4)));  // class 1: TP 2, 2 true, 4 predicted
  CHECK(classification_scores({1, 0, 1, 0}, {0, 0, 0, 0}).positive_f1 == 0.0);
  CHECK(classification_scores({0, 0}, {0, 0}).positive_f1 == 0.0);  // no member of class 1: 0, as scikit-learn
  // Perfect and inverted predictions.
  CHECK(classification_scores({0, 1, 2, 1}, {0, 1, 2, 1}).mcc == Approx(1.0));
  CHECK(classification_scores({0, 1, 0, 1}, {1, 0, 1, 0}).mcc == Approx(-1.0));
  // Three classes, worked by hand: confusion [[2,1,0],[0,2,0],[1,0,1]].
  auto m = classification_scores({0, 0, 0, 1, 1, 2, 2}, {0, 0, 1, 1, 1, 0, 2});
  CHECK(m.accuracy == Approx(5.0 / 7));
  const double f0 = 2.0 * 2 / (3 + 3), f1 = 2.0 * 2 / (2 + 3), f2 = 2.0 * 1 / (2 + 1);
  CHECK(m.macro_f1 == Approx((f0 + f1 + f2) / 3));
  // Gorodkin: c=5, s=7, p=(3,3,1), t=(3,2,2): (35 − 17) / sqrt((49 − 19)(49 − 17))
  CHECK(m.mcc == Approx(18.0 / std::sqrt(30.0 * 32.0)));
}

TEST_CASE("metrics: Pearson and Spearman", "[eval][metrics]") {
  CHECK(pearson({1, 2, 3, 4}, {2, 4, 6, 8}) == Approx(1.0));
  CHECK(pearson({1, 2, 3}, {3, 2, 1}) == Approx(-1.0));
  // x = (1,2,3,4), y = (1,3,2,4): cov 1.0·... worked: sxy = 4, sxx = syy = 5 -> 0.8
  CHECK(pearson({1, 2, 3, 4}, {1, 3, 2, 4}) == Approx(0.8));
  // Spearman is rank-based: any monotone map gives 1; ties take average ranks.
  CHECK(spearman({1, 2, 3, 4}, {1, 8, 27, 1000}) == Approx(1.0));
  CHECK(spearman({1, 2, 2, 3}, {1, 2, 3, 4}) == Approx(pearson({1, 2.5, 2.5, 4}, {1, 2, 3, 4})));
}

TEST_CASE("bleu: 13a tokenisation as sacreBLEU", "[eval][bleu]") {
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("It costs $3.50, (roughly).") == "It costs $ 3.50 , ( roughly ) .");
  CHECK(tokenize_13a("A 3-way split; e.g. this") == "A 3 - way split ; e . g . this");
  CHECK(tokenize_13a("don't &quot;quote&quot;") == "don't \" quote \"");
}

TEST_CASE("bleu: matches sacreBLEU's documented example", "[eval][bleu]") {
  // sacreBLEU README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)
  std::vector<std::string> hyps = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
  std::vector<std::vector<std::string>> refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
      {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
  auto b = corpus_bleu(hyps, refs);
  CHECK(b.hypothesis_length == 17);
  CHECK(b.reference_length == 18);
  CHECK(b.precisions[0] == Approx(82.35).margin(0.01));
  CHECK(b.precisions[1] == Approx(50.0).margin(0.01));
  CHECK(b.precisions[2] == Approx(45.45).margin(0.01));
  CHECK(b.precisions[3] == Approx(37.5).margin(0.01));
  CHECK(b.brevity_penalty == Approx(0.943).margin(0.0005));
  CHECK(b.bleu == Approx(48.53).margin(0.005));
  // Identical text scores 100; no 4-gram in common scores 0.
  CHECK(corpus_bleu({"a b c d e"}, {{"a b c d e"}}).bleu == Approx(100.0));
  CHECK(corpus_bleu({"a b c"}, {{"x y z"}}).bleu == 0.0);
  CHECK_THROWS(corpus_bleu({"a"}, {{"a", "b"}}));
}
