#include "lmkit/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>

#include "lmkit/core/error.h"

namespace lmkit::eval {

ClassificationScores classification_scores(const std::vector<int64_t>& labels, const std::vector<int64_t>& predictions) {
  check_input(labels.size() == predictions.size(), "metrics: labels and predictions differ in number");
  ClassificationScores s;
  s.examples = static_cast<int64_t>(labels.size());
  if (labels.empty()) return s;
  int64_t k = 0;
  for (size_t i = 0; i < labels.size(); ++i) k = std::max({k, labels[i] + 1, predictions[i] + 1});
  std::vector<std::vector<double>> confusion(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(k), 0));
  for (size_t i = 0; i < labels.size(); ++i) confusion[static_cast<size_t>(labels[i])][static_cast<size_t>(predictions[i])] += 1;
  const double n = static_cast<double>(labels.size());
  double correct = 0, f1_sum = 0;
  int classes = 0;
  std::vector<double> true_count(static_cast<size_t>(k), 0), pred_count(static_cast<size_t>(k), 0);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t d = 0; d < k; ++d) {
      true_count[static_cast<size_t>(c)] += confusion[static_cast<size_t>(c)][static_cast<size_t>(d)];
      pred_count[static_cast<size_t>(d)] += confusion[static_cast<size_t>(c)][static_cast<size_t>(d)];
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    const double tp = confusion[static_cast<size_t>(c)][static_cast<size_t>(c)];
    correct += tp;
    const double t = true_count[static_cast<size_t>(c)], p = pred_count[static_cast<size_t>(c)];
    if (t == 0 && p == 0) continue;
    f1_sum += 2 * tp / (t + p);
    ++classes;
  }
  s.accuracy = correct / n;
  s.macro_f1 = classes ? f1_sum / classes : 0;
  // Gorodkin's R_K: (c·s − Σ p_k t_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²))
  double pt = 0, pp = 0, tt = 0;
  for (int64_t c = 0; c < k; ++c) {
    pt += pred_count[static_cast<size_t>(c)] * true_count[static_cast<size_t>(c)];
    pp += pred_count[static_cast<size_t>(c)] * pred_count[static_cast<size_t>(c)];
    tt += true_count[static_cast<size_t>(c)] * true_count[static_cast<size_t>(c)];
  }
  const double denominator = std::sqrt((n * n - pp) * (n * n - tt));
  s.mcc = denominator > 0 ? (correct * n - pt) / denominator : 0.0;
  return s;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_input(x.size() == y.size() && x.size() >= 2, "pearson: needs two equally long series of 2+ values");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx), syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

namespace {
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t m = i; m <= j; ++m) r[order[m]] = average;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& x, const std::vector<double>& y) { return pearson(ranks(x), ranks(y)); }

std::string tokenize_13a(const std::string& line) {
  // sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a
  std::string s = line;
  s = std::regex_replace(s, std::regex("<skipped>"), "");
  s = std::regex_replace(s, std::regex("-\\n"), "");
  s = std::regex_replace(s, std::regex("\\n"), " ");
  if (s.find('&') != std::string::npos) {
    s = std::regex_replace(s, std::regex("&quot;"), "\"");
    s = std::regex_replace(s, std::regex("&amp;"), "&");
    s = std::regex_replace(s, std::regex("&lt;"), "<");
    s = std::regex_replace(s, std::regex("&gt;"), ">");
  }
  s = " " + s + " ";
  // Punctuation and symbols: { | } ~  [ \\ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  /
  static const std::regex punct("([{-~\\[-`\\x20-&(-+:-@/])");
  s = std::regex_replace(s, punct, " $1 ");
  s = std::regex_replace(s, std::regex("([^0-9])([\\.,])"), "$1 $2 ");
  s = std::regex_replace(s, std::regex("([\\.,])([^0-9])"), " $1 $2");
  s = std::regex_replace(s, std::regex("([0-9])(-)"), "$1 $2 ");
  // collapse whitespace and strip
  std::istringstream in(s);
  std::string word, out;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  check_input(!references.empty(), "BLEU: no references");
  for (const auto& set : references) {
    check_input(set.size() == hypotheses.size(), "BLEU: " + std::to_string(hypotheses.size()) + " hypotheses but " +
                                                     std::to_string(set.size()) + " references");
  }
  auto words = [](const std::string& text) {
    std::vector<std::string> w;
    std::istringstream in(tokenize_13a(text));
    std::string x;
    while (in >> x) w.push_back(x);
    return w;
  };
  using Counts = std::map<std::vector<std::string>, int>;
  auto ngrams = [](const std::vector<std::string>& w, size_t n) {
    Counts counts;
    for (size_t j = 0; j + n <= w.size(); ++j) ++counts[std::vector<std::string>(w.begin() + j, w.begin() + j + n)];
    return counts;
  };
  std::vector<double> matches(4, 0), totals(4, 0);
  BleuScore s;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const auto h = words(hypotheses[i]);
    std::vector<std::vector<std::string>> refs;
    for (const auto& set : references) refs.push_back(words(set[i]));
    size_t closest = refs[0].size();
    for (const auto& r : refs) {
      const long d = std::labs(static_cast<long>(r.size()) - static_cast<long>(h.size()));
      const long best = std::labs(static_cast<long>(closest) - static_cast<long>(h.size()));
      if (d < best || (d == best && r.size() < closest)) closest = r.size();
    }
    s.hypothesis_length += static_cast<int64_t>(h.size());
    s.reference_length += static_cast<int64_t>(closest);
    for (size_t n = 1; n <= 4; ++n) {
      Counts max_ref;
      for (const auto& r : refs) {
        for (const auto& [gram, count] : ngrams(r, n)) max_ref[gram] = std::max(max_ref[gram], count);
      }
      for (const auto& [gram, count] : ngrams(h, n)) {
        auto it = max_ref.find(gram);
        matches[n - 1] += std::min(count, it == max_ref.end() ? 0 : it->second);
      }
      totals[n - 1] += h.size() >= n ? static_cast<double>(h.size() - n + 1) : 0;
    }
  }
  double log_sum = 0;
  bool zero = false;
  for (int n = 0; n < 4; ++n) {
    const double p = totals[n] > 0 ? 100.0 * matches[n] / totals[n] : 0.0;
    s.precisions.push_back(p);
    if (matches[n] == 0) zero = true;
    else log_sum += std::log(p);
  }
  const double c = static_cast<double>(s.hypothesis_length), r = static_cast<double>(s.reference_length);
  s.brevity_penalty = c == 0 ? 0.0 : (c < r ? std::exp(1.0 - r / c) : 1.0);
  s.bleu = zero ? 0.0 : s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

}  // namespace lmkit::eval
