#include "lmkit/eval/squad.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "lmkit/core/error.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/loader.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

namespace {

// Indices of the n largest values, largest first (ties: the earlier index).
std::vector<int64_t> top(const std::vector<float>& v, int64_t n) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)]; });
  if (static_cast<int64_t>(order.size()) > n) order.resize(static_cast<size_t>(n));
  return order;
}

struct Candidate {
  double score = 0, start_logit = 0, end_logit = 0;
  int64_t begin = 0, end = 0;  // bytes of the context; begin == end == -1: the null answer
};

bool tokens_empty(const std::string& s) { return squad_normalize(s).find_first_not_of(' ') == std::string::npos; }

}  // namespace

std::vector<Answer> best_answers(const data::QuestionAnsweringDataset& ds, const std::vector<std::vector<float>>& start,
                                 const std::vector<std::vector<float>>& end, const AnswerOptions& o) {
  const auto& features = ds.features();
  const auto& set = ds.set();
  check_input(start.size() == features.size() && end.size() == features.size(), "question answering: one pair of logits a window");
  std::vector<std::vector<size_t>> windows(set.questions.size());
  for (size_t i = 0; i < features.size(); ++i) windows[static_cast<size_t>(features[i].question)].push_back(i);
  std::vector<Answer> answers;
  for (size_t qi = 0; qi < set.questions.size(); ++qi) {
    const size_t c = static_cast<size_t>(set.questions[qi].context);
    const std::string& context = set.contexts[c];
    const data::ContextWords& words = set.words[c];
    std::vector<Candidate> found;
    Candidate null;
    bool have_null = false;
    for (size_t i : windows[qi]) {
      const auto& f = features[i];
      const auto& s = start[i];
      const auto& e = end[i];
      const double null_score = static_cast<double>(s[0]) + e[0];
      if (!have_null || null.score > null_score) null = {null_score, s[0], e[0], -1, -1}, have_null = true;
      for (int64_t a : top(s, o.n_best)) {
        for (int64_t b : top(e, o.n_best)) {
          const int32_t wa = f.word[static_cast<size_t>(a)], wb = f.word[static_cast<size_t>(b)];
          if (wa < 0 || wb < 0 || b < a || b - a + 1 > o.max_answer_length) continue;
          found.push_back({static_cast<double>(s[static_cast<size_t>(a)]) + e[static_cast<size_t>(b)], s[static_cast<size_t>(a)],
                           e[static_cast<size_t>(b)], words.begin[static_cast<size_t>(wa)], words.end[static_cast<size_t>(wb)]});
        }
      }
    }
    if (o.with_negative && have_null) found.push_back(null);
    std::stable_sort(found.begin(), found.end(), [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
    if (static_cast<int64_t>(found.size()) > o.n_best) found.resize(static_cast<size_t>(o.n_best));
    const bool null_kept = std::any_of(found.begin(), found.end(), [](const Candidate& x) { return x.begin < 0; });
    if (o.with_negative && have_null && !null_kept) found.push_back(null);
    auto text = [&](const Candidate& x) {
      return x.begin < 0 ? std::string() : context.substr(static_cast<size_t>(x.begin), static_cast<size_t>(x.end - x.begin));
    };
    Answer answer;
    const auto span = std::find_if(found.begin(), found.end(), [](const Candidate& x) { return x.begin >= 0; });
    if (span == found.end()) {
      answer.text = o.with_negative ? "" : "empty";  // HF's placeholder when no span qualifies
    } else if (!o.with_negative) {
      answer.text = text(*span);
    } else {
      answer.null_margin = null.score - span->start_logit - span->end_logit;
      answer.text = answer.null_margin > o.null_threshold ? "" : text(*span);
    }
    answers.push_back(std::move(answer));
  }
  return answers;
}

double squad_v2_f1(const std::string& prediction, const std::string& truth) {
  const bool p = tokens_empty(prediction), g = tokens_empty(truth);
  if (p || g) return p && g ? 1.0 : 0.0;
  return squad_f1(prediction, truth);
}

Json squad_scores(const data::SquadSet& set, const std::map<std::string, std::string>& answers, bool v2) {
  double em = 0, f1 = 0, has_em = 0, has_f1 = 0, no_em = 0, no_f1 = 0;
  int64_t has = 0, no = 0;
  for (const auto& q : set.questions) {
    const auto it = answers.find(q.id);
    check_input(it != answers.end(), set.path + ": question '" + q.id + "' has no prediction");
    std::vector<std::string> gold;
    for (const auto& a : q.answers) {
      if (!v2 || !tokens_empty(a.text)) gold.push_back(a.text);  // v2.0 drops answers that normalise to nothing
    }
    const bool answerable = !q.answers.empty();  // v2.0's HasAns: any gold answer, even one that normalises to nothing
    if (v2 && gold.empty()) gold.push_back("");
    double best_em = 0, best_f1 = 0;
    for (const auto& g : gold) {
      best_em = std::max(best_em, squad_exact_match(it->second, g));
      best_f1 = std::max(best_f1, v2 ? squad_v2_f1(it->second, g) : squad_f1(it->second, g));
    }
    em += best_em, f1 += best_f1;
    if (answerable) has_em += best_em, has_f1 += best_f1, ++has;
    else no_em += best_em, no_f1 += best_f1, ++no;
  }
  const double n = static_cast<double>(set.questions.size());
  if (!v2) return {{"exact_match", 100.0 * em / n}, {"f1", 100.0 * f1 / n}, {"total", set.questions.size()}};
  Json r = {{"exact", 100.0 * em / n}, {"f1", 100.0 * f1 / n}, {"total", set.questions.size()}};
  if (has > 0) r["HasAns_exact"] = 100.0 * has_em / has, r["HasAns_f1"] = 100.0 * has_f1 / has, r["HasAns_total"] = has;
  if (no > 0) r["NoAns_exact"] = 100.0 * no_em / no, r["NoAns_f1"] = 100.0 * no_f1 / no, r["NoAns_total"] = no;
  return r;
}

std::vector<Answer> answer_questions(models::Model& model, const data::QuestionAnsweringDataset& dataset,
                                     const AnswerOptions& options, int64_t batch_size, int32_t pad_id, c10::Device device) {
  data::Loader loader(std::shared_ptr<const data::Dataset>(&dataset, [](const data::Dataset*) {}), data::in_order(batch_size, pad_id));
  const int64_t n = loader.batches_per_epoch(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  std::vector<std::vector<float>> start, end;
  size_t feature = 0;
  for (int64_t i = 0; i < n; ++i) {
    check_stop("evaluation");
    const Batch b = loader.next();
    const Output o = model.forward(b.to(device));
    check_input(o.get("start_logits").defined() && o.get("end_logits").defined(),
                model.architecture() + " gives no start_logits and end_logits: not a question-answering head");
    const at::Tensor s = o.get("start_logits").to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor e = o.get("end_logits").to(at::kCPU, at::kFloat).contiguous();
    for (int64_t r = 0; r < s.size(0); ++r, ++feature) {
      const int64_t length = static_cast<int64_t>(dataset.features()[feature].input_ids.size());
      const float* ps = s[r].data_ptr<float>();
      const float* pe = e[r].data_ptr<float>();
      start.emplace_back(ps, ps + length), end.emplace_back(pe, pe + length);
    }
  }
  return best_answers(dataset, start, end, options);
}

}  // namespace lmkit::eval
