#include "lmkit/eval/metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <string_view>

#include "lmkit/core/error.h"
#include "lmkit/eval/porter.h"
#include "lmkit/tokenizer/unicode.h"

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
  if (k > 1 && true_count[1] + pred_count[1] > 0) s.positive_f1 = 2 * confusion[1][1] / (true_count[1] + pred_count[1]);
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

namespace {

// sacreBLEU's compute_bleu with its default smoothing ("exp", mteval-v13a's): no match
// at any order scores 0; otherwise the k-th order without a match counts as 1 / 2^k
// matches, and an order with no n-grams at all (every hypothesis shorter than n)
// stays 0 and makes the score 0.
void bleu_from_counts(const std::vector<double>& matches, const std::vector<double>& totals, BleuScore& s) {
  s.precisions.assign(4, 0.0);
  double smooth = 1, log_sum = 0;
  bool zero = std::all_of(matches.begin(), matches.end(), [](double m) { return m == 0; });
  for (int n = 0; n < 4 && !zero; ++n) {
    if (totals[n] == 0) {
      zero = true;
      break;
    }
    if (matches[n] == 0) smooth *= 2, s.precisions[n] = 100.0 / (smooth * totals[n]);
    else s.precisions[n] = 100.0 * matches[n] / totals[n];
    log_sum += std::log(s.precisions[n]);
  }
  const double c = static_cast<double>(s.hypothesis_length), r = static_cast<double>(s.reference_length);
  s.brevity_penalty = c == 0 ? 0.0 : (c < r ? std::exp(1.0 - r / c) : 1.0);
  s.bleu = zero || c == 0 ? 0.0 : s.brevity_penalty * std::exp(log_sum / 4.0);
}

}  // namespace

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
  bleu_from_counts(matches, totals, s);
  return s;
}

namespace {

namespace uni = tokenizer::unicode;

// Python's str.split(): runs of Unicode whitespace separate.
std::vector<std::u32string> split_whitespace(const std::u32string& text) {
  std::vector<std::u32string> words;
  std::u32string word;
  for (const char32_t c : text) {
    if (!uni::is_whitespace(c)) {
      word += c;
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// A character of Python's Unicode \w, as far as normalised answers hold them:
// not whitespace, punctuation, a control/format character or a combining mark.
bool word_char(char32_t c) {
  return !uni::is_whitespace(c) && !uni::is_punctuation(c) && !uni::is_other(c) && !uni::is_mark_nonspacing(c);
}

// re.sub(r'\b(a|an|the)\b', ' ', text)
std::u32string remove_articles(const std::u32string& t) {
  static const std::u32string articles[] = {U"the", U"an", U"a"};
  std::u32string out;
  size_t i = 0;
  while (i < t.size()) {
    bool removed = false;
    if (i == 0 || !word_char(t[i - 1])) {
      for (const auto& w : articles) {
        const size_t end = i + w.size();
        if (t.compare(i, w.size(), w) == 0 && (end == t.size() || !word_char(t[end]))) {
          out += U' ', i = end, removed = true;
          break;
        }
      }
    }
    if (!removed) out += t[i++];
  }
  return out;
}

template <typename Gram>
double clipped_overlap(const std::map<Gram, int>& target, const std::map<Gram, int>& prediction) {
  double overlap = 0;
  for (const auto& [gram, count] : target) {
    auto it = prediction.find(gram);
    if (it != prediction.end()) overlap += std::min(count, it->second);
  }
  return overlap;
}

double f_measure(double precision, double recall) {
  return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
}

}  // namespace

std::string squad_normalize(const std::string& text) {
  std::u32string t;
  for (const char32_t c : uni::lowercase(uni::decode_utf8(text))) {
    // string.punctuation: the ASCII punctuation and symbol characters
    const bool ascii_punct = c < 128 && std::ispunct(static_cast<int>(c));
    if (!ascii_punct) t += c;
  }
  std::string out;
  for (const auto& w : split_whitespace(remove_articles(t))) out += (out.empty() ? "" : " ") + uni::encode_utf8(w);
  return out;
}

double squad_exact_match(const std::string& prediction, const std::string& truth) {
  return squad_normalize(prediction) == squad_normalize(truth) ? 1.0 : 0.0;
}

double squad_f1(const std::string& prediction, const std::string& truth) {
  std::map<std::string, int> p, g;
  double np = 0, ng = 0;
  std::istringstream pin(squad_normalize(prediction)), gin(squad_normalize(truth));
  for (std::string w; pin >> w;) ++p[w], ++np;
  for (std::string w; gin >> w;) ++g[w], ++ng;
  const double same = clipped_overlap(g, p);
  if (same == 0) return 0.0;
  return f_measure(same / np, same / ng);
}

std::vector<std::string> rouge_tokenize(const std::string& text, bool stem) {
  std::vector<std::string> tokens;
  std::string token;
  for (const char32_t c : uni::lowercase(uni::decode_utf8(text))) {
    if ((c >= U'a' && c <= U'z') || (c >= U'0' && c <= U'9')) {
      token += static_cast<char>(c);
    } else if (!token.empty()) {
      tokens.push_back(std::move(token));
      token.clear();
    }
  }
  if (!token.empty()) tokens.push_back(std::move(token));
  if (stem) {
    for (auto& t : tokens) {
      if (t.size() > 3) t = porter_stem(t);
    }
  }
  return tokens;
}

RougeScore rouge_n(const std::vector<std::string>& target, const std::vector<std::string>& prediction, int n) {
  using Counts = std::map<std::vector<std::string>, int>;
  auto ngrams = [n](const std::vector<std::string>& w, double& total) {
    Counts counts;
    const auto len = static_cast<size_t>(n);
    for (size_t j = 0; j + len <= w.size(); ++j) ++counts[std::vector<std::string>(w.begin() + j, w.begin() + j + len)], ++total;
    return counts;
  };
  double nt = 0, np = 0;
  const Counts t = ngrams(target, nt), p = ngrams(prediction, np);
  const double overlap = clipped_overlap(t, p);
  RougeScore s;
  s.precision = overlap / std::max(np, 1.0);
  s.recall = overlap / std::max(nt, 1.0);
  s.fmeasure = f_measure(s.precision, s.recall);
  return s;
}

RougeScore rouge_l(const std::vector<std::string>& target, const std::vector<std::string>& prediction) {
  RougeScore s;
  if (target.empty() || prediction.empty()) return s;
  std::vector<size_t> row(prediction.size() + 1, 0), prev(prediction.size() + 1, 0);
  for (size_t i = 1; i <= target.size(); ++i) {
    for (size_t j = 1; j <= prediction.size(); ++j) {
      row[j] = target[i - 1] == prediction[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], row[j - 1]);
    }
    std::swap(row, prev);
  }
  const auto lcs = static_cast<double>(prev[prediction.size()]);
  s.precision = lcs / static_cast<double>(prediction.size());
  s.recall = lcs / static_cast<double>(target.size());
  s.fmeasure = f_measure(s.precision, s.recall);
  return s;
}

GenerationScores generation_scores(const std::vector<std::string>& predictions, const std::vector<std::string>& references,
                                   bool rouge_stemmer) {
  check_input(predictions.size() == references.size(), std::to_string(predictions.size()) + " predictions but " +
                                                           std::to_string(references.size()) + " references");
  GenerationScores s;
  s.examples = static_cast<int64_t>(predictions.size());
  if (predictions.empty()) return s;
  s.bleu = corpus_bleu(predictions, {references}).bleu;
  for (size_t i = 0; i < predictions.size(); ++i) {
    s.exact_match += squad_exact_match(predictions[i], references[i]);
    s.f1 += squad_f1(predictions[i], references[i]);
    const auto t = rouge_tokenize(references[i], rouge_stemmer), p = rouge_tokenize(predictions[i], rouge_stemmer);
    s.rouge1 += rouge_n(t, p, 1).fmeasure, s.rouge2 += rouge_n(t, p, 2).fmeasure, s.rougeL += rouge_l(t, p).fmeasure;
  }
  const double scale = 100.0 / static_cast<double>(predictions.size());
  for (double* x : {&s.exact_match, &s.f1, &s.rouge1, &s.rouge2, &s.rougeL}) *x *= scale;
  return s;
}

}  // namespace lmkit::eval
