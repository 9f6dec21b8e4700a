// The suite file reader and the table's arithmetic (tasks/suite.h).
#include <catch2/catch.hpp>

#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/tasks/suite.h"
#include "test_util.h"

using namespace lmkit;
using namespace lmkit::tasks;

namespace {

Suite suite_of(const test::TempDir& dir, const std::string& text, const std::string& root = "/data") {
  std::ofstream(dir / "s.json") << text;
  return read_suite(dir / "s.json", root);
}

}  // namespace

TEST_CASE("suite: keys become the apps' flags, defaults fill in where they apply, paths start at the data root", "[eval][suite]") {
  test::TempDir dir;
  const Suite s = suite_of(dir, R"({"name": "x", "defaults": {"epochs": 2, "lr": 1e-4, "seeds": [3, 4], "batch_size": 8,
                                                     "label_all_subwords": true},
    "tasks": [
      {"name": "sts", "type": "regression", "train": "stsb/train.csv", "dev": "/abs/dev.csv", "text_column": 0,
       "text_pair_column": 1, "label_column": 2, "format": "csv", "test": "stsb/test.csv"},
      {"name": "lam", "type": "in-context", "data": "icl/lambada.jsonl", "seeds": [7, 8]},
      {"name": "few", "type": "in-context", "data": "icl/piqa.jsonl", "shots": 5, "delimiter": "\n"},
      {"name": "ner", "type": "token-classification", "train": "c/train", "dev": "c/dev", "epochs": 4},
      {"name": "t2t", "type": "seq2seq", "train": "m/train", "dev": "m/val", "source_lang": "de", "target_lang": "en",
       "metrics": ["bleu", "exact_match"]}
    ]})");
  REQUIRE(s.tasks.size() == 5);
  const SuiteTask& sts = s.tasks[0];
  CHECK(sts.task == "classification");
  CHECK(sts.train == "/data/stsb/train.csv");
  CHECK(sts.dev == "/abs/dev.csv");
  CHECK(sts.metrics == std::vector<std::string>{"pearson", "spearman"});
  CHECK(sts.seeds == std::vector<int64_t>{3, 4});
  CHECK(sts.finetune_flags == std::vector<std::string>{"--epochs", "2", "--lr", "0.0001", "--batch-size", "8", "--format", "csv",
                                                       "--text-column", "0", "--text-pair-column", "1", "--label-column", "2",
                                                       "--regression"});
  // The test evaluation reads the columns as finetuning did.
  CHECK(sts.evaluate_flags == std::vector<std::string>{"--batch-size", "8", "--format", "csv", "--text-column", "0",
                                                       "--text-pair-column", "1", "--label-column", "2"});
  const SuiteTask& lam = s.tasks[1];
  CHECK(lam.data == std::vector<std::string>{"/data/icl/lambada.jsonl"});
  CHECK(lam.finetune_flags.empty());
  CHECK(lam.evaluate_flags == std::vector<std::string>{"--batch-size", "8"});
  CHECK(lam.run_seeds() == std::vector<int64_t>{7});  // zero-shot: the seed changes nothing
  CHECK(s.tasks[2].run_seeds() == std::vector<int64_t>{3, 4});
  CHECK(s.tasks[2].evaluate_flags == std::vector<std::string>{"--batch-size", "8", "--shots", "5", "--delimiter", "\n"});
  CHECK(s.tasks[3].finetune_flags == std::vector<std::string>{"--epochs", "4", "--lr", "0.0001", "--batch-size", "8",
                                                              "--label-all-subwords"});
  CHECK(s.tasks[4].metrics == std::vector<std::string>{"bleu", "exact_match"});
  CHECK(std::count(s.tasks[4].finetune_flags.begin(), s.tasks[4].finetune_flags.end(), "--label-all-subwords") == 0);

  Suite picked = s;
  select_tasks(picked, {"t2t", "sts"});
  REQUIRE(picked.tasks.size() == 2);
  CHECK(picked.tasks[0].name == "sts");  // the suite's order
  CHECK_THROWS_WITH(select_tasks(picked, {"lam"}), Catch::Contains("--tasks: 'lam' is not a task of"));
  CHECK_THROWS_WITH(suite_of(dir, R"({"tasks": [], "name": "x"})"), Catch::Contains("key 'tasks' must be a non-empty list"));
  CHECK_THROWS_WITH(suite_of(dir, R"({"tasks": [{"name": "a"}], "version": 2})"), Catch::Contains("unknown key 'version'"));
  CHECK_THROWS_WITH(suite_of(dir, R"({"defaults": {"train": "x"}, "tasks": [{"name": "a"}]})"),
                    Catch::Contains("defaults: unknown key 'train'"));
  CHECK_THROWS_WITH(suite_of(dir, R"({"tasks": [{"name": "a", "type": "in-context", "data": "x", "seeds": [1, 1]}]})"),
                    Catch::Contains("seeds lists seed 1 twice"));
}

TEST_CASE("suite: a value lmkit-finetune or lmkit-evaluate would refuse is refused when the file is read, naming the task's key",
          "[eval][suite]") {
  test::TempDir dir;
  const std::string ok = R"({"name": "ok", "type": "classification", "train": "t", "dev": "d"}, )";
  auto second = [&](const std::string& keys) {
    return suite_of(dir, R"({"tasks": [)" + ok + R"({"name": "b", "type": "classification", "train": "t", "dev": "d", )" +
                             keys + "}]}");
  };
  CHECK_THROWS_WITH(second(R"("epochs": 0)"), Catch::Contains("s.json: tasks[1].epochs: 0 is out of range: must be > 0"));
  CHECK_THROWS_WITH(second(R"("max_length": 70000)"),
                    Catch::Contains("tasks[1].max_length: 70000 is out of range: must be in [4, 65536]"));
  CHECK_THROWS_WITH(second(R"("warmup_ratio": 1.5)"), Catch::Contains("tasks[1].warmup_ratio: 1.5 is out of range"));
  CHECK_THROWS_WITH(second(R"("lr": -0.001)"), Catch::Contains("tasks[1].lr: -0.001 is out of range: must be > 0"));
  CHECK_THROWS_WITH(second(R"("patience": -1)"), Catch::Contains("tasks[1].patience: -1 is out of range: must be >= 0"));
  // A default reaches every finetuned task: the first one names it.
  CHECK_THROWS_WITH(suite_of(dir, R"({"defaults": {"batch_size": 0}, "tasks": [)" + ok.substr(0, ok.size() - 2) + "]}"),
                    Catch::Contains("tasks[0].batch_size: 0 is out of range: must be > 0"));
  // An in-context task's, as lmkit-evaluate checks them.
  CHECK_THROWS_WITH(suite_of(dir, R"({"tasks": [{"name": "f", "type": "in-context", "data": "x", "shots": -2}]})"),
                    Catch::Contains("tasks[0].shots: -2 is out of range: must be >= 0"));
  CHECK_THROWS_WITH(suite_of(dir, R"({"tasks": [{"name": "f", "type": "in-context", "data": "x", "batch_size": 0}]})"),
                    Catch::Contains("tasks[0].batch_size: 0 is out of range: must be > 0"));
  // The limits themselves are values it takes.
  const Suite s = second(R"("max_length": 65536, "warmup_ratio": 1, "clip": 0, "max_train_examples": 0)");
  CHECK(s.tasks[1].finetune_flags == std::vector<std::string>{"--max-length", "65536", "--max-train-examples", "0",
                                                              "--warmup-ratio", "1", "--clip", "0"});
}

TEST_CASE("suite: figures in %, mean and sample sd, the average over task scores, the difference of two rows", "[eval][suite]") {
  CHECK(mean_sd({}).first == 0);
  CHECK(mean_sd({5}).second == 0);
  const auto [m, sd] = mean_sd({1, 2, 3, 4});
  CHECK(m == Approx(2.5));
  CHECK(sd == Approx(std::sqrt(5.0 / 3)));  // sum of squares 5, n - 1 = 3

  test::TempDir dir;
  const Suite s = suite_of(dir, R"({"name": "x", "tasks": [
      {"name": "mrpc", "type": "pair-classification", "train": "a", "dev": "b", "text_pair_column": "s2", "metrics": ["f1", "accuracy"]},
      {"name": "t2t", "type": "seq2seq", "train": "a", "dev": "b", "test": "c"},
      {"name": "lam", "type": "in-context", "data": "c"}]})");
  const Json mrpc = task_figures(s.tasks[0], {{{"f1", 0.8}, {"accuracy", 0.7}}, {{"f1", 0.9}, {"accuracy", 0.6}}}, {1, 2});
  CHECK(mrpc["metrics"]["f1"]["mean"].get<double>() == Approx(85));
  CHECK(mrpc["metrics"]["accuracy"]["sd"].get<double>() == Approx(std::sqrt(50.0)));
  CHECK(mrpc["score"]["values"][0].get<double>() == Approx(75));  // the mean of F1 and accuracy, as GLUE
  CHECK(mrpc["score"]["values"][1].get<double>() == Approx(75));
  const Json t2t = task_figures(s.tasks[1], {{{"bleu", 20.0}}, {{"bleu", 30.0}}}, {1, 2});
  CHECK(t2t["metrics"]["bleu"]["mean"].get<double>() == Approx(25));  // already a percentage
  CHECK_THROWS_WITH(task_figures(s.tasks[1], {{{"exact_match", 1.0}}}, {5}),
                    Catch::Contains("t2t (seed 5): the result has no 'bleu' figure"));
  CHECK_THROWS_WITH(task_figures(s.tasks[1], {{{"bleu", nullptr}}}, {6}),
                    Catch::Contains("t2t (seed 6): 'bleu' is undefined (null"));

  const Json lam = task_figures(s.tasks[2], {{{"accuracy", 0.1}}}, {1});
  const Json a = suite_row(s, "pre", {{"checkpoint", "p"}}, {{"mrpc", mrpc}, {"t2t", t2t}, {"lam", lam}});
  // Seed 1: (75 + 20 + 10) / 3, seed 2: (75 + 30 + 10) / 3 (a task run once gives its one score to every seed).
  CHECK(a["average"]["values"][0].get<double>() == Approx(35));
  CHECK(a["average"]["values"][1].get<double>() == Approx(115.0 / 3));
  const Json b = suite_row(s, "random", {{"init", "random"}}, {{"mrpc", mrpc}, {"t2t", nullptr}, {"lam", nullptr}});
  CHECK(b["average"]["tasks"] == Json::array({"mrpc"}));
  CHECK(b["average"]["mean"].get<double>() == Approx(75));
  const Json d = row_difference(a, b);
  CHECK(d["tasks"]["mrpc"]["score"].get<double>() == Approx(0));
  CHECK_FALSE(d["tasks"].contains("t2t"));
  CHECK(d["same_tasks"] == false);
  CHECK(d["average"].get<double>() == Approx(0));  // over mrpc, the one task both rows have: not 36.7 - 75
  CHECK(d["average_tasks"] == Json::array({"mrpc"}));
  CHECK(row_difference(a, a)["average"].get<double>() == Approx(0));
  const Json a2 = suite_row(s, "pre2", {{"checkpoint", "q"}}, {{"mrpc", mrpc}, {"t2t", task_figures(s.tasks[1], {{{"bleu", 10.0}}, {{"bleu", 20.0}}}, {1, 2})}, {"lam", lam}});
  CHECK(row_difference(a, a2)["average"].get<double>() == Approx(a["average"]["mean"].get<double>() - a2["average"]["mean"].get<double>()));
  CHECK(row_difference(a, a2)["same_tasks"] == true);
  const std::string md = suite_markdown(s, {a, b}, d);
  CHECK(md.find("| model | average | mrpc F1/acc | t2t BLEU (test) | lam acc (0-shot) |") != std::string::npos);
  CHECK(md.find("| pre | 36.7 ± 2.4 | 85.0 ± 7.1 / 65.0 ± 7.1 | 25.0 ± 7.1 | 10.0 |") != std::string::npos);
  CHECK(md.find("| random | 75.0 ± 0.0 | 85.0 ± 7.1 / 65.0 ± 7.1 | – | – |") != std::string::npos);
  CHECK(md.find("| difference | +0.0* | +0.0 / +0.0 | – | – |") != std::string::npos);
  CHECK(md.find("*: the rows average different tasks; the difference is over the 1 task both have.") != std::string::npos);
  // The footer names the seeds the rows ran (1 and 2; the suite file lists none, so its tasks default to seed 1), and
  // each row that ran fewer.
  CHECK(md.find("mean ± sample sd over seeds 1, 2 (a zero-shot") != std::string::npos);
  const Json one = suite_row(s, "one seed", {{"init", "random"}}, {{"mrpc", task_figures(s.tasks[0], {{{"f1", 0.8}, {"accuracy", 0.7}}}, {3})}});
  CHECK(suite_markdown(s, {a, one}, Json()).find("over seeds 1, 2, 3 (pre: seeds 1, 2; one seed: seed 3)") != std::string::npos);
  CHECK(suite_markdown(s, {one}, Json()).find("over seed 3 (a zero-shot") != std::string::npos);
}
