// Evaluation metrics: classification (accuracy, macro-F1, Matthews correlation),
// regression (Pearson, Spearman), corpus BLEU as sacreBLEU computes it, and the
// text-to-text figures: SQuAD's exact match and token F1, rouge-score's ROUGE-1/2/L.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lmkit::eval {

struct ClassificationScores {
  double accuracy = 0, macro_f1 = 0, mcc = 0;
  double positive_f1 = 0;  ///< F1 of class 1 (scikit-learn's f1_score, pos_label=1: GLUE's MRPC F1); 0 if it has no members
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
/// with r the reference length closest to each hypothesis (the shorter on ties);
/// sacreBLEU's default "exp" smoothing: the k-th n-gram order without a match has
/// precision 100 / (2^k × its n-gram count).
/// `references[k][i]` is the k-th reference of hypothesis i.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

/// SQuAD v1.1's answer normalisation (its official evaluate script): lower case,
/// ASCII punctuation removed, the articles a/an/the removed, whitespace collapsed.
std::string squad_normalize(const std::string& text);
/// SQuAD v1.1's exact match of one prediction: 1 when the normalised strings are equal.
double squad_exact_match(const std::string& prediction, const std::string& truth);
/// SQuAD v1.1's token F1 of one prediction: the bag-of-words F1 of the normalised
/// strings' whitespace tokens (0 when they share none, an empty pair included).
double squad_f1(const std::string& prediction, const std::string& truth);

/// rouge-score's default tokenizer: lower case, every run of characters other than
/// a-z and 0-9 a separator; with `stem` (its use_stemmer=True), every token longer
/// than three characters replaced by its Porter stem (eval/porter.h).
std::vector<std::string> rouge_tokenize(const std::string& text, bool stem = false);

struct RougeScore {
  double precision = 0, recall = 0, fmeasure = 0;
};
/// ROUGE-N of one prediction against its target as rouge-score computes it: clipped
/// n-gram overlap over the prediction's (precision) and target's (recall) n-gram counts.
RougeScore rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& prediction, int n);
/// ROUGE-L: the longest common subsequence over the prediction's and target's lengths.
RougeScore rouge_l(const std::vector<std::string>& target, const std::vector<std::string>& prediction);

/// Every text-to-text figure of a set of predictions against one reference each, all
/// on a 0–100 scale: sacreBLEU's corpus BLEU; SQuAD's exact match and F1 and
/// ROUGE-1/2/L F-measure averaged over the examples.
struct GenerationScores {
  double bleu = 0, exact_match = 0, f1 = 0, rouge1 = 0, rouge2 = 0, rougeL = 0;
  int64_t examples = 0;
};
/// `rouge_stemmer`: ROUGE over Porter-stemmed tokens, as rouge-score's use_stemmer=True.
GenerationScores generation_scores(const std::vector<std::string>& predictions, const std::vector<std::string>& references,
                                   bool rouge_stemmer = false);

}  // namespace lmkit::eval
