// The finetuning-task registry: lmkit's tasks, a task registered by user code, names
// taken twice, a task's flags (their clashes, and a flag of another task), and the one
// writer and reader of finetune.json.
#include <catch2/catch.hpp>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/models/family.h"
#include "lmkit/tasks/task.h"
#include "test_util.h"

using namespace lmkit;

namespace {

// A task of user code: one flag of its own, or (clash) one classification has already.
class EchoTask : public tasks::Task {
 public:
  explicit EchoTask(std::string flag) : flag_(std::move(flag)) {}
  void add_flags(CLI::App& app, tasks::Mode) override { app.add_option(flag_, value_, "echo: a value"); }
  tasks::Prepared prepare(const tasks::Context&, const std::string&, const std::string&) override { return {}; }
  Json info() const override { return {{"value", value_}}; }
  void use_info(const Json& info, const CLI::App&) override { value_ = info.value("value", value_); }
  Json evaluate(models::Model&, const tasks::Context&, const std::string&, const std::string&) override { return {}; }
  std::string best_metric() const override { return "accuracy"; }
  std::string describe(const Json&) const override { return ""; }
  std::string result_name() const override { return "echo"; }

 private:
  std::string flag_, value_;
};

tasks::TaskSpec echo_spec(const std::string& name, const std::string& metric, const std::string& flag) {
  tasks::TaskSpec t;
  t.name = name, t.summary = "echo", t.head = models::kClassificationHead, t.metric = metric;
  t.predictions = "predictions.txt";
  t.create = [flag] { return std::make_unique<EchoTask>(flag); };
  return t;
}

}  // namespace

TEST_CASE("tasks: lmkit's tasks, one registered by user code, and a name or metric taken twice", "[tasks]") {
  const auto& all = tasks::tasks();
  REQUIRE(all.size() >= 3);
  CHECK(all[0].name == "classification");
  CHECK(all[1].name == "token-classification");
  CHECK(all[2].name == "seq2seq");
  CHECK(all[2].metric == "generation");
  CHECK(all[0].source == "lmkit");
  CHECK(tasks::task_with_metric("token-classification") == &all[1]);
  CHECK(tasks::task_with_metric("perplexity") == nullptr);
  CHECK(tasks::head_of(tasks::task("classification"), models::family("bert")) == "BertForSequenceClassification");
  CHECK_THROWS_WITH(tasks::head_of(tasks::task("token-classification"), models::family("transformer")),
                    Catch::Contains("model_type 'transformer' has no token-classification head"));
  CHECK_THROWS_WITH(tasks::task("ner"), Catch::Contains("unknown task 'ner' (expected classification, token-classification"));

  tasks::register_task(echo_spec("echo", "echo-metric", "--echo-value"));
  CHECK(tasks::task("echo").metric == "echo-metric");
  CHECK_THAT(tasks::task_names(), Catch::EndsWith("or echo"));
  CHECK_THROWS_WITH(tasks::register_task(echo_spec("classification", "other", "--x")),
                    "task 'classification' is registered twice: by lmkit and by lmkit");
  CHECK_THROWS_WITH(tasks::register_task(echo_spec("echo2", "generation", "--y")),
                    "metric 'generation' is registered twice: by lmkit (task seq2seq) and by lmkit");
}

TEST_CASE("tasks: each task adds its flags, a clash is named, and another task's flag is refused", "[tasks]") {
  if (!tasks::task_with_metric("echo-metric")) tasks::register_task(echo_spec("echo", "echo-metric", "--echo-value"));
  {
    CLI::App app;
    auto flags = tasks::add_task_flags(app, tasks::Mode::kFinetune);
    REQUIRE(flags.instances.size() == tasks::tasks().size());
    app.parse("--echo-value 7 --regression", false);
    flags.check_given(app, "classification", {"--echo-value"});
    CHECK_THROWS_WITH(flags.check_given(app, "classification"), "--echo-value applies to --task echo");
    CHECK_THROWS_WITH(flags.check_given(app, "echo"), "--regression applies to --task classification");
    CHECK(flags.of("echo").info() == Json({{"value", "7"}}));
  }
  CLI::App evaluate;
  auto flags = tasks::add_task_flags(evaluate, tasks::Mode::kEvaluate);
  evaluate.parse("--beams 2", false);
  CHECK_THROWS_WITH(flags.check_given(evaluate, "classification"), "--beams applies to --metric generation");
  tasks::register_task(echo_spec("clash", "clash-metric", "--text-pair-column"));
  CLI::App clash;
  CHECK_THROWS_WITH(tasks::add_task_flags(clash, tasks::Mode::kFinetune),
                    Catch::StartsWith("task 'clash' (lmkit) adds a flag the app has already"));
}

TEST_CASE("tasks: finetune.json has one writer and one reader", "[tasks]") {
  test::TempDir dir;
  CHECK(tasks::read_info(dir.path.string(), "classification") == Json::object());  // HF's and pretrained checkpoints
  tasks::save_info(dir.path.string(), "token-classification", 96, {{"tag_column", 3}});
  const Json j = tasks::read_info(dir.path.string(), "token-classification");
  CHECK(j == Json({{"task", "token-classification"}, {"max_length", 96}, {"tag_column", 3}}));
  CHECK_THROWS_WITH(tasks::read_info(dir.path.string(), "classification"),
                    Catch::EndsWith("finetune.json: the checkpoint was finetuned for --task token-classification, not classification"));
  // Classifiers finetuned before the registry wrote no "task".
  save_json_file(dir / "finetune.json", {{"max_length", 64}, {"text_column", "sentence"}});
  CHECK(tasks::read_info(dir.path.string(), "classification").value("max_length", 0) == 64);
  save_json_file(dir / "finetune.json", {{"max_length", 2}});
  CHECK_THROWS_WITH(tasks::read_info(dir.path.string(), "classification"), Catch::EndsWith("'max_length' must be an integer >= 4"));
}
