#include "lmkit/eval/porter.h"

#include <functional>
#include <map>
#include <vector>

// A port of nltk/stem/porter.py (NLTK 3.10.4, NLTK_EXTENSIONS mode), rule by rule; the
// comments name the paper's steps (Porter, "An algorithm for suffix stripping", 1980).
namespace lmkit::eval {

namespace {

bool vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

bool ends_with(const std::string& w, const std::string& suffix) {
  return w.size() >= suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string drop(const std::string& w, size_t n) { return w.substr(0, w.size() - n); }

// A consonant is a letter other than a, e, i, o, u, and other than y preceded by a consonant.
bool consonant(const std::string& w, size_t i) {
  if (vowel(w[i])) return false;
  if (w[i] != 'y') return true;
  bool negate = false;
  while (i > 0 && w[i] == 'y') negate = !negate, --i;
  return !vowel(w[i]) != negate;
}

// m in [C](VC){m}[V].
int measure(const std::string& stem) {
  int m = 0;
  bool previous_vowel = false;
  for (size_t i = 0; i < stem.size(); ++i) {
    const bool c = consonant(stem, i);
    if (c && previous_vowel) ++m;
    previous_vowel = !c;
  }
  return m;
}

bool positive_measure(const std::string& stem) { return measure(stem) > 0; }

bool contains_vowel(const std::string& stem) {
  for (size_t i = 0; i < stem.size(); ++i) {
    if (!consonant(stem, i)) return true;
  }
  return false;
}

// *d: a double consonant at the end.
bool ends_double_consonant(const std::string& w) {
  return w.size() >= 2 && w[w.size() - 1] == w[w.size() - 2] && consonant(w, w.size() - 1);
}

// *o: consonant-vowel-consonant at the end, the last not w, x or y (NLTK: also a two-letter vowel-consonant word).
bool ends_cvc(const std::string& w) {
  const size_t n = w.size();
  const bool cvc = n >= 3 && consonant(w, n - 3) && !consonant(w, n - 2) && consonant(w, n - 1) && w[n - 1] != 'w' &&
                   w[n - 1] != 'x' && w[n - 1] != 'y';
  return cvc || (n == 2 && !consonant(w, 0) && consonant(w, 1));
}

using Condition = std::function<bool(const std::string&)>;
struct Rule {
  std::string suffix, replacement;
  Condition condition;  ///< empty: unconditional
};

// The first rule whose suffix the word has decides: its replacement when the condition holds, else the word.
// The suffix "*d" stands for a double consonant.
std::string apply_rules(const std::string& w, const std::vector<Rule>& rules) {
  for (const auto& r : rules) {
    if (r.suffix == "*d") {
      if (!ends_double_consonant(w)) continue;
      const std::string stem = drop(w, 2);
      return !r.condition || r.condition(stem) ? stem + r.replacement : w;
    }
    if (!ends_with(w, r.suffix)) continue;
    const std::string stem = drop(w, r.suffix.size());
    return !r.condition || r.condition(stem) ? stem + r.replacement : w;
  }
  return w;
}

std::string step1a(const std::string& w) {
  if (ends_with(w, "ies") && w.size() == 4) return drop(w, 3) + "ie";
  return apply_rules(w, {{"sses", "ss", {}}, {"ies", "i", {}}, {"ss", "ss", {}}, {"s", "", {}}});
}

std::string step1b(const std::string& w) {
  if (ends_with(w, "ied")) return drop(w, 3) + (w.size() == 4 ? "ie" : "i");
  if (ends_with(w, "eed")) {
    const std::string stem = drop(w, 3);
    return measure(stem) > 0 ? stem + "ee" : w;
  }
  std::string stem;
  bool removed = false;
  for (const char* suffix : {"ed", "ing"}) {
    if (!ends_with(w, suffix)) continue;
    stem = drop(w, std::string(suffix).size());
    if (contains_vowel(stem)) {
      removed = true;
      break;
    }
  }
  if (!removed) return w;
  const char last = stem.back();
  return apply_rules(stem, {{"at", "ate", {}},
                            {"bl", "ble", {}},
                            {"iz", "ize", {}},
                            {"*d", std::string(1, last), [last](const std::string&) { return last != 'l' && last != 's' && last != 'z'; }},
                            {"", "e", [](const std::string& s) { return measure(s) == 1 && ends_cvc(s); }}});
}

// NLTK: y -> i only after a consonant that is not the whole stem.
std::string step1c(const std::string& w) {
  return apply_rules(w, {{"y", "i", [](const std::string& s) { return s.size() > 1 && consonant(s, s.size() - 1); }}});
}

std::string step2(const std::string& w) {
  if (ends_with(w, "alli") && positive_measure(drop(w, 4))) return step2(drop(w, 4) + "al");
  const Condition m = positive_measure;
  return apply_rules(w, {{"ational", "ate", m}, {"tional", "tion", m}, {"enci", "ence", m},  {"anci", "ance", m},
                         {"izer", "ize", m},    {"bli", "ble", m},     {"alli", "al", m},     {"entli", "ent", m},
                         {"eli", "e", m},       {"ousli", "ous", m},   {"ization", "ize", m}, {"ation", "ate", m},
                         {"ator", "ate", m},    {"alism", "al", m},    {"iveness", "ive", m}, {"fulness", "ful", m},
                         {"ousness", "ous", m}, {"aliti", "al", m},    {"iviti", "ive", m},   {"biliti", "ble", m},
                         {"fulli", "ful", m},   {"logi", "log", [w](const std::string&) { return positive_measure(drop(w, 3)); }}});
}

std::string step3(const std::string& w) {
  const Condition m = positive_measure;
  return apply_rules(w, {{"icate", "ic", m}, {"ative", "", m}, {"alize", "al", m}, {"iciti", "ic", m},
                         {"ical", "ic", m},  {"ful", "", m},   {"ness", "", m}});
}

std::string step4(const std::string& w) {
  const Condition m = [](const std::string& s) { return measure(s) > 1; };
  const Condition ion = [](const std::string& s) { return measure(s) > 1 && (s.back() == 's' || s.back() == 't'); };
  return apply_rules(w, {{"al", "", m},   {"ance", "", m}, {"ence", "", m}, {"er", "", m},  {"ic", "", m},
                         {"able", "", m}, {"ible", "", m}, {"ant", "", m},  {"ement", "", m}, {"ment", "", m},
                         {"ent", "", m},  {"ion", "", ion}, {"ou", "", m},  {"ism", "", m}, {"ate", "", m},
                         {"iti", "", m},  {"ous", "", m},  {"ive", "", m},  {"ize", "", m}});
}

std::string step5a(const std::string& w) {
  if (!ends_with(w, "e")) return w;
  const std::string stem = drop(w, 1);
  const int m = measure(stem);
  return m > 1 || (m == 1 && !ends_cvc(stem)) ? stem : w;
}

std::string step5b(const std::string& w) {
  return apply_rules(w, {{"ll", "l", [w](const std::string&) { return measure(drop(w, 1)) > 1; }}});
}

const std::map<std::string, std::string>& irregular() {
  static const std::map<std::string, std::string> forms = {
      {"sky", "sky"},         {"skies", "sky"},     {"dying", "die"},         {"lying", "lie"},       {"tying", "tie"},
      {"news", "news"},       {"innings", "inning"}, {"inning", "inning"},    {"outings", "outing"},  {"outing", "outing"},
      {"cannings", "canning"}, {"canning", "canning"}, {"howe", "howe"},      {"proceed", "proceed"}, {"exceed", "exceed"},
      {"succeed", "succeed"}};
  return forms;
}

}  // namespace

std::string porter_stem(const std::string& word) {
  const auto it = irregular().find(word);
  if (it != irregular().end()) return it->second;
  if (word.size() <= 2) return word;
  return step5b(step5a(step4(step3(step2(step1c(step1b(step1a(word))))))));
}

}  // namespace lmkit::eval
