// Evaluation metrics: classification (accuracy, macro-F1, Matthews correlation),
// regression (Pearson, Spearman) and corpus BLEU as sacreBLEU computes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmkit::eval {

struct ClassificationScores {
  double accuracy = 0, macro_f1 = 0, mcc = 0;
  int64_t examples = 0;
};

/// Accuracy; macro-F1 over the classes present in labels or predictions (F1 of a
/// class with no true and no predicted members is skipped); Matthews correlation
/// in its multi-class form (Gorodkin 2004; equal to the binary MCC for two
/// classes), 0 when undefined (e.g. every prediction in one class).
ClassificationScores classification_scores(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions);

double pearson(const std::vector<double>& x, const std::vector<double>& y);
/// Pearson correlation of the ranks (ties get their average rank).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

struct BleuScore {
  double bleu = 0;                  ///< 0..100
  std::vector<double> precisions;   ///< 1- to 4-gram precisions, in %
  double brevity_penalty = 0;
  int64_t hypothesis_length = 0, reference_length = 0;
};

/// sacreBLEU's tokenizer "13a" (mteval-v13a): separates punctuation and symbols.
std::string tokenize_13a(const std::string& line);

/// Corpus BLEU as sacreBLEU's defaults: 13a tokenisation, n-gram counts clipped
/// by the most any reference holds and summed over the corpus, n = 1..4,
/// geometric mean of the precisions, brevity penalty exp(1 − r/c) when c < r,
/// with r the reference length closest to each hypothesis (the shorter on ties).
/// `references[k][i]` is the k-th reference of hypothesis i.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

}  // namespace lmkit::eval
