// --task question-answering: extractive QA on SQuAD's JSON (v1.1, v2.0's unanswerable
// questions), HF run_qa's windows and answers, scored by SQuAD's official evaluate scripts.
#include <cstdio>

#include "lmkit/core/app.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/squad.h"
#include "lmkit/eval/squad.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/builtin.h"

namespace lmkit::tasks {

namespace {

class QuestionAnswering : public Task {
 public:
  void add_flags(CLI::App& app, Mode mode) override {
    const std::string as = mode == Mode::kEvaluate ? " (default: as finetuned)" : "";
    app.add_option("--doc-stride", doc_stride_,
                   "question-answering: context tokens two windows of a long context share (HF run_qa's; default 128)" + as)
        ->check(non_negative());
    app.add_option("--max-query-length", max_query_, "question-answering: the question's first tokens kept (default 64)" + as)
        ->check(positive());
    app.add_option("--max-answer-length", max_answer_, "question-answering: the longest answer in tokens (default 30)" + as)
        ->check(positive());
    app.add_option("--n-best", n_best_, "question-answering: start and end candidates per window (default 20)" + as)
        ->check(positive());
    app.add_option("--null-score-diff-threshold", null_threshold_,
                   "question-answering, SQuAD v2.0: answer \"\" when the null score beats the best span's by more (default 0)" + as);
  }

  Prepared prepare(const Context& c, const std::string& train, const std::string& dev) override {
    data::SquadSet train_set = data::read_squad(train);
    data::SquadSet dev_set = data::read_squad(dev);
    c.first_examples(dev_set.questions);
    with_negative_ = train_set.with_negative || dev_set.with_negative;
    Prepared p;
    p.num_labels = 2;
    p.train_set = std::make_shared<data::QuestionAnsweringDataset>(std::move(train_set), c.tokenizer, options(c.max_length, true));
    auto dev_ds = std::make_shared<data::QuestionAnsweringDataset>(std::move(dev_set), c.tokenizer, options(c.max_length, false));
    p.dev_examples = static_cast<int64_t>(dev_ds->set().questions.size());
    p.evaluate = [this, dev_ds, batch = c.batch_size, pad = c.pad_id, device = c.device](models::Model& m, const std::string& out) {
      return score(m, *dev_ds, batch, pad, device, out);
    };
    return p;
  }

  Json info() const override {
    return {{"doc_stride", doc_stride_}, {"max_query_length", max_query_}, {"max_answer_length", max_answer_},
            {"n_best", n_best_}, {"null_score_diff_threshold", null_threshold_}, {"version_2_with_negative", with_negative_}};
  }

  void use_info(const Json& info, const CLI::App& app) override {
    auto take = [&](const char* flag, const char* key, auto& member) {
      if (app.count(flag) == 0 && info.contains(key)) member = info[key].get<std::decay_t<decltype(member)>>();
    };
    take("--doc-stride", "doc_stride", doc_stride_);
    take("--max-query-length", "max_query_length", max_query_);
    take("--max-answer-length", "max_answer_length", max_answer_);
    take("--n-best", "n_best", n_best_);
    take("--null-score-diff-threshold", "null_score_diff_threshold", null_threshold_);
    with_negative_ = info.value("version_2_with_negative", false);
  }

  Json evaluate(models::Model& model, const Context& c, const std::string& path, const std::string& predictions) override {
    data::SquadSet set = data::read_squad(path);
    c.first_examples(set.questions);
    with_negative_ = with_negative_ || set.with_negative;
    const int64_t length = c.length_within_positions(384);
    data::QaOptions o = options(length, false);
    o.length_flag = c.given("--seq-len") ? "--seq-len" : "--max-length (as finetuned)";
    const data::QuestionAnsweringDataset ds(std::move(set), c.tokenizer, o);
    Json r = score(model, ds, c.batch_size, c.pad_id, c.device, predictions);
    r["max_length"] = length;
    return r;
  }

  std::string best_metric() const override { return "f1"; }

  std::string describe(const Json& r) const override {
    char line[200];
    std::snprintf(line, sizeof line, "exact match %.2f, F1 %.2f (%lld questions%s)", r["exact_match"].get<double>(),
                  r["f1"].get<double>(), static_cast<long long>(r["total"].get<int64_t>()),
                  r.value("squad_version", "") == "v2.0" ? ", SQuAD v2.0" : "");
    return line;
  }

  std::string result_name() const override { return "question-answering"; }

 private:
  data::QaOptions options(int64_t max_length, bool training) const {
    data::QaOptions o;
    o.max_length = max_length;
    o.doc_stride = doc_stride_;
    o.max_query_length = max_query_;
    o.training = training;
    return o;
  }

  Json score(models::Model& m, const data::QuestionAnsweringDataset& ds, int64_t batch, int32_t pad, c10::Device device,
             const std::string& out) const {
    eval::AnswerOptions o;
    o.n_best = n_best_;
    o.max_answer_length = max_answer_;
    o.with_negative = with_negative_;
    o.null_threshold = null_threshold_;
    const auto answers = eval::answer_questions(m, ds, o, batch, pad, device);
    std::map<std::string, std::string> by_id;
    for (size_t i = 0; i < answers.size(); ++i) {
      by_id[ds.set().questions[i].id] = answers[i].text;
    }
    Json r = eval::squad_scores(ds.set(), by_id, with_negative_);
    // evaluate-v2.0.py's names, with v1.1's exact_match beside its exact: one name for the dev figure and suites.
    if (with_negative_) r["exact_match"] = r["exact"];
    r["squad_version"] = with_negative_ ? "v2.0" : "v1.1";
    r["windows"] = static_cast<int64_t>(ds.features().size());
    if (!out.empty()) write_file_atomic(out, Json(by_id).dump(2) + "\n");
    return r;
  }

  int64_t doc_stride_ = 128, max_query_ = 64, max_answer_ = 30, n_best_ = 20;
  double null_threshold_ = 0.0;
  bool with_negative_ = false;
};

}  // namespace

TaskSpec question_answering_task() {
  TaskSpec t;
  t.name = "question-answering";
  t.summary = "extractive QA on SQuAD's JSON (v1.1, v2.0), scored by SQuAD's official exact match and F1";
  t.head = models::kQuestionAnsweringHead;
  t.metric = "squad";
  t.predictions = "predictions.json";
  t.suite_types = {{"question-answering", {"exact_match", "f1"}, {"exact_match", "f1"}, {}, {}, true}};
  t.suite_keys = {{"doc_stride", "--doc-stride", KeyValue::kInt, true},
                  {"max_query_length", "--max-query-length", KeyValue::kInt, true},
                  {"max_answer_length", "--max-answer-length", KeyValue::kInt, true}};
  t.create = [] { return std::make_unique<QuestionAnswering>(); };
  return t;
}

}  // namespace lmkit::tasks
