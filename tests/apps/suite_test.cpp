// lmkit-suite end to end on the tiny suite (tests/fixtures/suite/tiny.json).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"

using namespace lmkit;
using test::run;

namespace {

std::string tiny_suite() { return test::source_dir() + "/tests/fixtures/suite/tiny.json"; }

// A pretrained checkpoint with its tokenizer: bert-tiny, or a one-layer GPT-2, two steps on the sample text.
std::string pretrained(const test::TempDir& dir, const std::string& type) {
  const auto& f = test::data_fixture(type);
  std::string model = test::source_dir() + "/models/bert-tiny.json";
  if (type == "gpt2") {
    model = dir / "gpt.json";
    std::ofstream(model) << R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 64})";
  }
  const auto r = run("lmkit-pretrain --model " + model + " --train " + test::sample("valid.txt") + " --tokenizer " +
                     (*f.dir / "tok.model") + " --output " + (dir / ("pre-" + type)) +
                     " --steps 2 --batch-size 2 --seq-len 16 --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  return dir / ("pre-" + type + "/final");
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("suite: a BERT and its random init through every finetuned task type, resumed without rerunning", "[apps][suite]") {
  test::TempDir dir;
  const std::string ckpt = pretrained(dir, "bert");
  const std::string cmd = "lmkit-suite --suite " + tiny_suite() + " --checkpoint " + ckpt + " --output " + (dir / "out") +
                          " --baseline random --threads 1 --tasks sentiment,pairs,scores,ner,lambada";
  auto r = run(cmd);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(count(r.out, "lmkit-finetune (log") == 10);  // 5 runs (sentiment has 2 seeds) for each of 2 starts
  CHECK(r.out.find("lambada: does not apply") != std::string::npos);
  const Json j = load_json_file(dir / "out/results.json");
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][1]["label"] == "random init (bert)");
  const Json& row = j["rows"][0];
  CHECK(row["tasks"]["lambada"].is_null());
  CHECK(row["average"]["tasks"].size() == 4);
  // Every figure is the run's own result, in %: dev for the finetuned tasks, the test set where one is given.
  const Json& sentiment = row["tasks"]["sentiment"]["metrics"];
  REQUIRE(sentiment["accuracy"]["values"].size() == 2);
  for (int seed : {1, 2}) {
    const Json run_result = load_json_file(dir / ("out/sentiment/seed-" + std::to_string(seed) + "/result.json"));
    CHECK(sentiment["accuracy"]["values"][seed - 1].get<double>() == Approx(100 * run_result["accuracy"].get<double>()));
    CHECK(sentiment["mcc"]["values"][seed - 1].get<double>() == Approx(100 * run_result["mcc"].get<double>()));
  }
  CHECK(row["tasks"]["pairs"]["metrics"].contains("f1"));
  CHECK(row["tasks"]["scores"]["metrics"].contains("spearman"));
  CHECK(row["tasks"]["ner"]["split"] == "test");
  CHECK(row["tasks"]["ner"]["metrics"]["f1"]["mean"].get<double>() ==
        Approx(100 * load_json_file(dir / "out/ner/seed-1/test.json")["f1"].get<double>()));
  CHECK(read_file(dir / "out/logs/scores-seed-1.log").find("training on the first 60 of 120 examples") != std::string::npos);
  const double diff = row["average"]["mean"].get<double>() - j["rows"][1]["average"]["mean"].get<double>();
  CHECK(j["difference"]["average"].get<double>() == Approx(diff));
  const std::string md = read_file(dir / "out/results.md");
  CHECK(md.find("| model | average | Sentiment acc/MCC | Pairs F1/acc | Scores Pearson/Spearman | NER F1 (test) | LAMBADA acc (0-shot) |") !=
        std::string::npos);
  CHECK(md.find("| random init (bert) |") != std::string::npos);
  CHECK(md.find("| difference | ") != std::string::npos);

  // A second call finds every run finished; a run whose stamp is gone (a kill before it was written) runs again.
  auto again = run(cmd);
  INFO(again.out);
  REQUIRE(again.code == 0);
  CHECK(count(again.out, "lmkit-finetune (log") == 0);
  CHECK(count(again.out, "finished earlier") == 10);
  CHECK(load_json_file(dir / "out/results.json") == j);
  std::filesystem::remove(dir / "out/sentiment/seed-2.json");
  auto rerun = run(cmd);
  INFO(rerun.out);
  REQUIRE(rerun.code == 0);
  CHECK(count(rerun.out, "lmkit-finetune (log") == 1);
  CHECK(rerun.out.find("sentiment seed 2: lmkit-finetune") != std::string::npos);

  // Another start in the same directory is refused; --collect tables finished runs, a shared row once.
  auto other = run("lmkit-suite --suite " + tiny_suite() + " --init random --model " + ckpt + "/config.json --tokenizer " +
                   ckpt + " --output " + (dir / "out") + " --tasks sentiment");
  CHECK(other.code == 2);
  CHECK(other.out.find("holds the suite runs of") != std::string::npos);
  auto table = run("lmkit-suite --suite " + tiny_suite() + " --tasks sentiment,pairs,scores,ner,lambada --collect " + (dir / "out") +
                   "," + (dir / "out/random"));
  INFO(table.out);
  REQUIRE(table.code == 0);
  CHECK(count(table.out, "| random init (bert) |") == 1);
  CHECK(count(table.out, "| " + ckpt + " |") == 1);
  // Without --suite, --collect takes the suite the runs used (docs/suite.md).
  auto own = run("lmkit-suite --tasks sentiment,pairs,scores,ner,lambada --collect " + (dir / "out") + "," + (dir / "out/random"));
  INFO(own.out);
  CHECK(own.code == 0);
  CHECK(own.out == table.out);
  auto none = run("lmkit-suite --output " + (dir / "x"));
  CHECK(none.code == 2);
  CHECK_THAT(none.out, Catch::StartsWith("error: --suite FILE is required (the suite to run)"));
}

TEST_CASE("suite: a GPT through text-to-text and in-context tasks, a zero-shot task run once", "[apps][suite]") {
  test::TempDir dir;
  const std::string ckpt = pretrained(dir, "gpt2");
  auto r = run("lmkit-suite --suite " + tiny_suite() + " --checkpoint " + ckpt + " --output " + (dir / "out") +
               " --threads 1 --tasks as-text,lambada,choice --name tiny-gpt");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json row = load_json_file(dir / "out/results.json")["rows"][0];
  CHECK(row["label"] == "tiny-gpt");
  CHECK(row["tasks"]["lambada"]["seeds"] == Json::array({1}));
  CHECK(row["tasks"]["lambada"]["split"] == "0-shot");
  CHECK(row["tasks"]["choice"]["seeds"] == Json::array({1, 2}));
  CHECK(row["tasks"]["choice"]["split"] == "1-shot");
  const Json choice = load_json_file(dir / "out/choice/seed-2/result.json");
  CHECK(row["tasks"]["choice"]["metrics"]["accuracy_norm"]["values"][1].get<double>() ==
        Approx(100 * choice["accuracy_norm"].get<double>()));
  // Text-to-text figures are percentages already.
  const Json t2t = load_json_file(dir / "out/as-text/seed-1/result.json");
  CHECK(row["tasks"]["as-text"]["metrics"]["exact_match"]["mean"].get<double>() == Approx(t2t["exact_match"].get<double>()));
}

TEST_CASE("suite: bad suite files, flags and failing runs are one error line and exit 2", "[apps][suite]") {
  test::TempDir dir;
  const std::string ckpt = test::source_dir() + "/tests/fixtures/suite";  // not a checkpoint: never reached when the suite is bad
  auto suite_file = [&](const std::string& name, const std::string& tasks) {
    std::ofstream(dir / name) << R"({"name": "bad", "tasks": [)" << tasks << "]}";
    return dir / name;
  };
  const std::string ok_task = R"({"name": "s", "type": "classification", "train": "a.tsv", "dev": "a.tsv"})";
  { std::ofstream(dir / "a.tsv") << "sentence\tlabel\ngood\tpos\nbad\tneg\n"; }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {suite_file("k.json", R"({"name": "s", "type": "classification", "train": "a.tsv", "dev": "a.tsv", "epoch": 3})"),
       "k.json: tasks[0]: unknown key 'epoch'"},
      {suite_file("t.json", R"({"name": "s", "type": "tagging", "train": "a.tsv", "dev": "a.tsv"})"),
       "tasks[0].type 'tagging' is not one of"},
      {suite_file("m.json", R"({"name": "s", "type": "regression", "train": "a.tsv", "dev": "a.tsv", "metrics": "mcc"})"),
       "tasks[0].metrics: 'mcc' is not a figure of this task type (pearson or spearman)"},
      {suite_file("r.json", R"({"name": "s", "type": "classification", "dev": "a.tsv"})"), "tasks[0]: key 'train' is required"},
      {suite_file("d.json", ok_task + "," + ok_task), "tasks[1]: a second task named 's'"},
      {suite_file("v.json", R"({"name": "s", "type": "classification", "train": "a.tsv", "dev": "a.tsv", "epochs": "3"})"),
       "tasks[0].epochs must be an integer"},
      // Out of lmkit-finetune's range: refused before the first task runs, not when this one starts.
      {suite_file("e.json", ok_task + R"(, {"name": "z", "type": "classification", "train": "a.tsv", "dev": "a.tsv", "epochs": 0})"),
       "e.json: tasks[1].epochs: 0 is out of range: must be > 0"},
      {suite_file("p.json", R"({"name": "s", "type": "pair-classification", "train": "a.tsv", "dev": "a.tsv"})"),
       "a pair-classification task needs text_pair_column"},
      {suite_file("a.json", R"({"name": "s", "type": "in-context", "data": "x.jsonl", "epochs": 2})"),
       "tasks[0].epochs does not apply to in-context tasks"},
      {suite_file("n.json", R"({"name": "a/b", "type": "classification", "train": "a.tsv", "dev": "a.tsv"})"),
       "tasks[0].name 'a/b' must be letters"},
      {suite_file("f.json", R"({"name": "s", "type": "classification", "train": "none.tsv", "dev": "a.tsv"})"),
       "task s: " + (dir / "none.tsv") + ": no such file"},
      // A flag's own spelling is the same key ("max-train-examples" is max_train_examples).
      {suite_file("u.json", R"({"name": "s", "type": "classification", "train": "a.tsv", "dev": "a.tsv",
                                "max-train-examples": 2, "max_train_examples": 3})"),
       "tasks[0]: keys 'max-train-examples' and 'max_train_examples' name one flag"},
      {suite_file("w.json", R"({"name": "s", "type": "in-context", "data": "x.jsonl", "max-train-examples": 2})"),
       "tasks[0].max_train_examples does not apply to in-context tasks"},
  };
  for (const auto& [file, expected] : cases) {
    auto r = run("lmkit-suite --suite " + file + " --init random --model " + test::source_dir() + "/models/bert-tiny.json" +
                 " --tokenizer x --output " + (dir / "out") + " --dry-run");
    INFO(file << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(r.out.rfind("error: ", 0) == 0);
    CHECK(r.out.find(expected) != std::string::npos);
  }
  const std::string good = suite_file("good.json", ok_task);
  auto flags = [&](const std::string& extra) { return run("lmkit-suite --suite " + good + " " + extra); };
  CHECK(flags("--checkpoint " + ckpt + " --output " + (dir / "o")).out.find("not a checkpoint directory") != std::string::npos);
  CHECK(flags("--tasks nope --checkpoint x --output " + (dir / "o")).out.find("--tasks: 'nope' is not a task of") != std::string::npos);
  CHECK(flags("--init random --model " + test::source_dir() + "/models/bert-tiny.json --tokenizer x --baseline random --output " +
              (dir / "o"))
            .out.find("--baseline random compares a --checkpoint") != std::string::npos);
  // An output folder with files of the user's is not taken over.
  std::filesystem::create_directories(dir / "mine");
  { std::ofstream(dir / "mine/notes.txt") << "keep\n"; }
  auto mine = flags("--init random --model " + test::source_dir() + "/models/bert-tiny.json --tokenizer x --output " + (dir / "mine"));
  CHECK(mine.code == 2);
  CHECK(mine.out.find("exists and is not a suite run directory") != std::string::npos);
  CHECK(read_file(dir / "mine/notes.txt") == "keep\n");
  // A run that fails names the task, the app, its error and its log.
  const auto& f = test::data_fixture("bert");
  auto failed = run("lmkit-suite --suite " + suite_file("c.json", R"({"name": "s", "type": "classification", "train": "a.tsv",
      "dev": "a.tsv", "text_column": "text"})") + " --init random --model " + test::source_dir() + "/models/bert-tiny.json --tokenizer " +
                    (*f.dir / "tok.model") + " --output " + (dir / "fails") + " --threads 1");
  INFO(failed.out);
  CHECK(failed.code == 2);
  CHECK(failed.out.find("error: s seed 1: lmkit-finetune failed: ") != std::string::npos);
  CHECK(failed.out.find("(log: " + (dir / "fails/logs/s-seed-1.log") + ")") != std::string::npos);
}
