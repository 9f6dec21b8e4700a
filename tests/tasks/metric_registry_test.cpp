// The metric registry (tasks/metric.h): lmkit's metrics and the tasks' in --help's order,
// one registered by user code with a flag of its own, names taken twice (a built-in's, a
// task's), a flag of another metric refused, and a suite task that also runs a metric.
#include <catch2/catch.hpp>

#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/tasks/suite.h"
#include "lmkit/models/family.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"
#include "test_util.h"

using namespace lmkit;

namespace {

tasks::MetricSpec count_metric(const std::string& name) {
  tasks::MetricSpec m;
  m.name = name, m.summary = "counts the data files";
  m.add_flags = [name](CLI::App& app) { app.add_option("--" + name + "-scale")->description(name + ": a factor")->type_name("INT"); };
  m.refuses = [](const models::Family& f, const Json&) -> std::string { return f.model_type == "t5" ? "not for t5" : ""; };
  m.run = [name](const tasks::MetricInputs& in) {
    return Json{{"files", static_cast<int64_t>(in.data.size()) * in.flag<int64_t>("--" + name + "-scale", 1)}};
  };
  return m;
}

std::vector<std::string> metric_registry_names() {
  std::vector<std::string> names;
  for (const auto& m : tasks::metrics()) names.push_back(m.name);
  return names;
}

}  // namespace

TEST_CASE("metrics: lmkit's own, each task's, then one of user code, and a name taken twice refused", "[tasks][metrics]") {
  const std::vector<std::string> builtin = {"perplexity", "mlm-perplexity", "pseudo-perplexity", "span", "objective", "bleu",
                                            "multiple-choice", "cloze", "completion", "in-context", "classification",
                                            "token-classification", "generation", "squad", "image-classification"};
  CHECK(metric_registry_names() == builtin);
  CHECK(tasks::metric("generation").task == "seq2seq");
  CHECK(tasks::metric("bleu").also_reads == std::vector<std::string>{"--beams", "--max-new-tokens"});
  CHECK(tasks::metric("perplexity").corpus_data);
  CHECK(tasks::metric("in-context").many_data);
  CHECK(tasks::metric("perplexity").refuses(models::family("bert"), Json::object()) ==
        "--metric perplexity does not apply to a bert checkpoint (use mlm-perplexity, pseudo-perplexity)");
  CHECK(tasks::metric("perplexity").refuses(models::family("gpt2"), Json::object()).empty());
  CHECK_THROWS_WITH(tasks::metric("ece"), Catch::Contains("--metric 'ece' is not one of perplexity, mlm-perplexity"));

  tasks::register_metric(count_metric("count"));
  CHECK(metric_registry_names().back() == "count");
  CHECK(tasks::metric("count").source == "lmkit");  // registered by the program, not a plugin
  CHECK_THAT(tasks::metric_help(), Catch::EndsWith("; count: counts the data files"));
  CHECK_THROWS_WITH(tasks::register_metric(count_metric("bleu")), "metric 'bleu' is registered twice: by lmkit and by lmkit");
  CHECK_THROWS_WITH(tasks::register_metric(count_metric("classification")),
                    "metric 'classification' is registered twice: by lmkit (task classification) and by lmkit");
  tasks::MetricSpec empty;
  empty.name = "nothing";
  CHECK_THROWS_WITH(tasks::register_metric(empty), Catch::Contains("a metric needs a name and run"));
  // A task may not take a metric's name either.
  tasks::TaskSpec t = tasks::task("classification");
  t.name = "other", t.metric = "count";
  CHECK_THROWS_WITH(tasks::register_task(t), Catch::Contains("metric 'count' is registered twice"));
}

TEST_CASE("metrics: each metric's flags, and a flag of another metric refused by name", "[tasks][metrics]") {
  tasks::register_metric(count_metric("tally"));
  CLI::App app;
  app.allow_extras(false);
  const tasks::MetricFlags flags = tasks::add_metric_flags(app);
  REQUIRE(app.get_option_no_throw("--references") != nullptr);
  REQUIRE(app.get_option_no_throw("--tally-scale") != nullptr);
  app.parse(std::vector<std::string>{"refs.txt", "--references", "2", "--tally-scale"});  // reversed, as CLI11 takes it
  CHECK_THROWS_WITH(flags.check_given(app, tasks::metric("tally")), "--references applies to --metric bleu, not tally");
  CHECK_THROWS_WITH(flags.check_given(app, tasks::metric("bleu")), "--tally-scale applies to --metric tally, not bleu");
  CLI::App icl;
  const tasks::MetricFlags icl_flags = tasks::add_metric_flags(icl);
  icl.parse(std::vector<std::string>{"3", "--shots"});
  CHECK_NOTHROW(icl_flags.check_given(icl, tasks::metric("completion")));  // multiple-choice adds it; the three read it
  CHECK_THROWS_WITH(icl_flags.check_given(icl, tasks::metric("perplexity")),
                    "--shots applies to --metric multiple-choice, completion or in-context, not perplexity");
}

TEST_CASE("metrics: a suite task also runs a registered metric, and names its figures METRIC.FIGURE", "[tasks][metrics][suite]") {
  tasks::register_metric(count_metric("cal"));
  test::TempDir dir;
  auto suite = [&](const std::string& task) {
    std::ofstream(dir / "s.json") << R"({"name": "x", "tasks": [)" + task + "]}";
    return tasks::read_suite(dir / "s.json", "/data");
  };
  const tasks::Suite s = suite(R"({"name": "sst", "type": "classification", "train": "t", "dev": "d", "evaluate": "cal",
                                  "metrics": ["accuracy", "cal.files"]})");
  CHECK(s.tasks[0].also_evaluate == std::vector<std::string>{"cal"});
  CHECK(s.tasks[0].metrics == std::vector<std::string>{"accuracy", "cal.files"});
  CHECK(s.tasks[0].definition["evaluate"] == Json::array({"cal"}));
  // Its figures are shown, not averaged into the task's score.
  const Json figures = tasks::task_figures(s.tasks[0], {Json{{"accuracy", 0.5}, {"cal.files", 0.25}}}, {1});
  CHECK(figures["score"]["mean"].get<double>() == Approx(50.0));
  CHECK(figures["metrics"]["cal.files"]["mean"].get<double>() == Approx(25.0));
  CHECK_THROWS_WITH(suite(R"({"name": "a", "type": "classification", "train": "t", "dev": "d", "evaluate": "ece"})"),
                    Catch::Contains("tasks[0].evaluate: 'ece' is not a metric"));
  CHECK_THROWS_WITH(suite(R"({"name": "a", "type": "classification", "train": "t", "dev": "d", "evaluate": "classification"})"),
                    Catch::Contains("'classification' is the task's own metric"));
  CHECK_THROWS_WITH(suite(R"({"name": "a", "type": "in-context", "data": "x.jsonl", "evaluate": "cal"})"),
                    Catch::Contains(".evaluate is for finetuned tasks"));
  CHECK_THROWS_WITH(suite(R"({"name": "a", "type": "classification", "train": "t", "dev": "d", "metrics": ["cal.files"]})"),
                    Catch::Contains("'cal.files' is not a figure of this task type"));
}
