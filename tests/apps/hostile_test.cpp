// The third hostile probe's findings (#42), one class a test: a run's own files, no
// replacement of a user's file, bounded generation, data read as meant, messages that
// name what is wrong.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/io/safetensors.h"

using namespace lmkit;
using test::run;

namespace {

std::string fixture_file(const std::string& name) { return test::source_dir() + "/tests/fixtures/" + name; }

// A two-layer T5 that finetunes text-to-text in seconds.
std::string tiny_t5(const test::TempDir& dir) {
  const std::string path = dir / "t5.json";
  std::ofstream(path) << R"({"model_type": "t5", "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
    "num_decoder_layers": 1, "num_heads": 4, "feed_forward_proj": "relu", "tie_word_embeddings": true})";
  return path;
}

// One finished run of each finetuning task, in dir/NAME.
std::vector<std::pair<std::string, std::string>> finished_runs(const test::TempDir& dir) {
  const std::string bert_tok = *test::data_fixture("bert").dir / "tok.model";
  const std::string t5_tok = *test::data_fixture("t5").dir / "tok.model";
  const std::string bert = " --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + bert_tok;
  {
    std::ofstream out(dir / "cls.tsv");
    out << "sentence\tlabel\ngood film\tpos\nbad film\tneg\ngreat film\tpos\nawful film\tneg\n";
  }
  const std::string common = " --epochs 1 --batch-size 4 --threads 1 --max-train-examples 8";
  return {
      {"classification", "lmkit-finetune --task classification" + bert + " --train " + (dir / "cls.tsv") + " --dev " +
                             (dir / "cls.tsv") + " --max-length 16" + common},
      {"token-classification", "lmkit-finetune --task token-classification" + bert + " --train " +
                                   fixture_file("ner/train.conll") + " --dev " + fixture_file("ner/dev.conll") +
                                   " --max-length 24" + common},
      {"seq2seq", "lmkit-finetune --task seq2seq --init random --model " + tiny_t5(dir) + " --tokenizer " + t5_tok +
                      " --train " + fixture_file("seq2seq/dev.tsv") + " --dev " + fixture_file("seq2seq/dev.tsv") +
                      " --max-length 24 --max-target-length 6 --max-new-tokens 4" + common},
  };
}

// A bert-tiny pretrained two steps into dir/pre (its checkpoint: dir/pre/final).
void pretrain_bert_tiny(const test::TempDir& dir) {
  auto pre = run("lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --tokenizer " +
                 (*test::data_fixture("bert").dir / "tok.model") + " --train " + test::source_dir() +
                 "/data/wikitext-2-sample/valid.txt --steps 2 --batch-size 2 --seq-len 16 --threads 1 --output " + (dir / "pre"));
  INFO(pre.out);
  REQUIRE(pre.code == 0);
}

}  // namespace

TEST_CASE("hostile: a finished run of every task is its own: --resume has nothing to do, --overwrite replaces it",
          "[apps][hostile]") {
  test::TempDir dir;
  for (const auto& [task, command] : finished_runs(dir)) {
    const std::string out = " --output " + (dir / task);
    auto first = run(command + out);
    INFO(task << "\n" << first.out);
    REQUIRE(first.code == 0);
    auto resumed = run(command + out + " --resume");
    INFO(resumed.out);
    CHECK(resumed.code == 0);
    auto replaced = run(command + out + " --overwrite");
    INFO(replaced.out);
    CHECK(replaced.code == 0);
    CHECK(std::filesystem::exists(dir / task + "/best/finetune.json"));
  }
}

namespace {

// One case of the probe: a command, the exit code, the first error line's pattern, and
// files that must come through unchanged.
struct Case {
  std::string what, command;
  int code;
  std::string error;
  std::vector<std::string> survive;
};

std::string contents(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? read_file(path) : "<missing>";
}

void check_case(const Case& c) {
  std::vector<std::string> before;
  for (const auto& f : c.survive) before.push_back(contents(f));
  auto r = run(c.command);
  INFO(c.what << "\n" << c.command << "\n" << r.out);
  CHECK(r.code == c.code);
  if (!c.error.empty()) {
    const auto at = r.out.find("error: ");
    REQUIRE(at != std::string::npos);
    CHECK_THAT(r.out.substr(at, r.out.find('\n', at) - at), Catch::Contains(c.error));
  }
  for (size_t i = 0; i < c.survive.size(); ++i) CHECK(contents(c.survive[i]) == before[i]);
}

}  // namespace

TEST_CASE("hostile: the probe's cases are one error line naming the fault, and nothing of the user's is lost",
          "[apps][hostile]") {
  test::TempDir dir;
  const auto runs = finished_runs(dir);
  for (size_t i = 0; i < runs.size(); i += 2) {  // classification and seq2seq: the checkpoints below
    auto r = run(runs[i].second + " --output " + (dir / runs[i].first));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  const std::string cls = dir / "classification/best", t5 = dir / "seq2seq/best";
  std::ofstream(dir / "user.json") << R"({"metric": "mine", "checkpoint": "mine", "note": "keep me"})";
  std::ofstream(dir / "one-choice.jsonl") << R"({"query": "q", "choices": ["a"], "gold": 0})" << "\n";
  std::ofstream(dir / "big-gold.jsonl") << R"({"query": "q", "choices": ["a", "b"], "gold": 9223372036854775808})" << "\n";
  std::ofstream(dir / "empty.txt") << "";
  std::ofstream(dir / "spellings.tsv") << "sentence\tlabel\na\t1\nb\t2\nc\t1.0\n";
  std::ofstream(dir / "int-tags.jsonl") << R"({"tokens": ["EU", "rejects"], "tags": [3, 0]})" << "\n";
  std::ofstream(dir / "names.txt") << "O\nB-PER\nI-PER\nB-ORG\nI-ORG\n";
  std::filesystem::create_directories(dir / "array");
  std::ofstream(dir / "array/config.json") << "[1, 2]";
  std::filesystem::copy_file(t5 + "/tokenizer.model", dir / "array/tokenizer.model");
  {  // float weights relabelled as integers
    std::filesystem::copy(cls, dir / "relabelled", std::filesystem::copy_options::recursive);
    auto file = io::read_safetensors(cls + "/model.safetensors");
    for (auto& [name, t] : file.tensors) {
      if (name.find("word_embeddings") != std::string::npos) t = t.view(at::kInt);
    }
    io::write_safetensors(dir / "relabelled/model.safetensors", file.tensors);
  }
  const std::string bert_tok = *test::data_fixture("bert").dir / "tok.model";
  const std::string tagger = "lmkit-finetune --task token-classification --init random --model " +
                             test::model_preset("bert-tiny") + " --tokenizer " + bert_tok + " --epochs 1 --threads 1 --max-length 16";
  const std::string gpt = "lmkit-pretrain --model " + test::model_preset("gpt-mini") + " --tokenizer " +
                          (*test::data_fixture("gpt2").dir / "tok.model") + " --train " +
                          test::source_dir() + "/data/wikitext-2-sample/valid.txt --steps 1 --seq-len 16 --batch-size 2";
  std::ofstream(dir / "a-file") << "x";
  std::ofstream(dir / "bad-tag.conll") << "EU B-ORG\nrejects O\n\nGerman B-MISC\ncall O\nto O\nboycott B-XYZ\n";
  const std::vector<Case> cases = {
      {"--source-lang for an objective that reads no parallel text", gpt + " --source-lang de --output " + (dir / "p"), 2,
       "--source-lang and --target-lang apply to parallel-text objectives, not clm", {}},
      {"--tensorboard into a file, said before any training", gpt + " --tensorboard " + (dir / "a-file") + " --output " +
           (dir / "q"),
       2, "--tensorboard", {dir / "a-file"}},
      {"--max-length past the model's positions, said before training", "lmkit-finetune --init random --model " +
           test::model_preset("bert-tiny") + " --tokenizer " + bert_tok + " --train " + (dir / "cls.tsv") + " --dev " +
           (dir / "cls.tsv") + " --max-length 600 --output " + (dir / "s"),
       2, "--max-length 600 exceeds the model's 512 positions (max_position_embeddings in its config.json)", {}},
      {"--label-column naming a JSONL field for a CoNLL file", tagger + " --train " + fixture_file("ner/train.conll") +
           " --dev " + fixture_file("ner/dev.conll") + " --label-column ner_tags --output " + (dir / "t"),
       2, "--label-column ner_tags names a JSONL field, but", {}},
      {"a CoNLL tag outside the training tags is cited at its own line", tagger + " --train " + fixture_file("ner/train.conll") +
           " --dev " + (dir / "bad-tag.conll") + " --output " + (dir / "r"),
       2, "bad-tag.conll:7: tag 'B-XYZ' (word 'boycott')", {}},
      {"evaluate keeps a user's JSON that merely has metric and checkpoint keys",
       "lmkit-evaluate --checkpoint " + cls + " --data " + (dir / "cls.tsv") + " --metric classification --output " +
           (dir / "user.json"),
       2, "user.json", {dir / "user.json"}},
      {"--predictions and --output are one file",
       "lmkit-evaluate --checkpoint " + cls + " --data " + (dir / "cls.tsv") + " --metric classification --output " +
           (dir / "same.json") + " --predictions " + (dir / "same.json"),
       2, "--predictions and --output name the same file", {}},
      {"config.json is not an object", "lmkit-evaluate --checkpoint " + (dir / "array") + " --data " + (dir / "cls.tsv") +
           " --metric perplexity --output " + (dir / "a.json"),
       2, "config.json: the model config must be a JSON object", {}},
      {"an empty BLEU input", "lmkit-evaluate --checkpoint " + t5 + " --data " + (dir / "empty.txt") + " --references " +
           (dir / "empty.txt") + " --metric bleu --output " + (dir / "b.json"),
       2, "no source lines to translate", {}},
      {"a multiple-choice line with one choice", "lmkit-evaluate --checkpoint " + t5 + " --data " + (dir / "one-choice.jsonl") +
           " --metric multiple-choice --output " + (dir / "c.json"),
       2, "'choices' needs at least two options", {}},
      {"a gold index of 2^63", "lmkit-evaluate --checkpoint " + t5 + " --data " + (dir / "big-gold.jsonl") +
           " --metric multiple-choice --output " + (dir / "d.json"),
       2, "gold 9223372036854775808 is outside the 2 options", {}},
      {"unbounded generation when finetuning",
       test::with_flag(runs[2].second, "--max-new-tokens", "1000000") + " --output " + (dir / "e"), 2,
       "--max-new-tokens 1000000 exceeds 4096", {}},
      {"unbounded generation when evaluating", "lmkit-evaluate --checkpoint " + t5 + " --data " +
           fixture_file("seq2seq/dev.tsv") + " --metric generation --max-new-tokens 1000000 --output " + (dir / "f.json"),
       2, "--max-new-tokens 1000000 exceeds 4096", {}},
      {"two spellings of one numeric label", "lmkit-finetune --init random --model " + test::model_preset("bert-tiny") +
           " --tokenizer " + bert_tok + " --train " + (dir / "spellings.tsv") + " --dev " + (dir / "spellings.tsv") +
           " --output " + (dir / "g"),
       2, "spellings.tsv:4: labels '1' and '1.0' are one number written two ways", {}},
      {"integer JSONL tags without names", tagger + " --train " + (dir / "int-tags.jsonl") + " --dev " +
           (dir / "int-tags.jsonl") + " --output " + (dir / "h"),
       2, "int-tags.jsonl:1: tag 3 in 'tags' is a number (a ClassLabel id): give --label-names FILE", {}},
      {"integer JSONL tags with their names", tagger + " --train " + (dir / "int-tags.jsonl") + " --dev " +
           (dir / "int-tags.jsonl") + " --label-names " + (dir / "names.txt") + " --output " + (dir / "i"),
       0, "", {}},
      {"float weights stored as integers", "lmkit-evaluate --checkpoint " + (dir / "relabelled") + " --data " +
           (dir / "cls.tsv") + " --metric classification --output " + (dir / "j.json"),
       2, "word_embeddings.weight' is Int but the model's parameter is Float", {}},
      {"a duplicate seed for the suite", "lmkit-suite --suite " + fixture_file("suite/tiny.json") + " --checkpoint " + cls +
           " --output " + (dir / "k") + " --seeds 1,1",
       2, "--seeds lists seed 1 twice", {}},
      {"a negative seed for the suite", "lmkit-suite --suite " + fixture_file("suite/tiny.json") + " --checkpoint " + cls +
           " --output " + (dir / "l") + " --seeds -1",
       2, "--seeds: -1 is out of range", {}},
  };
  for (const auto& c : cases) check_case(c);
  CHECK(load_json_file(dir / "i/best/finetune.json")["label_names"].size() == 5);
  // Past the file-size limit: one error line, and no temporary left in the run directory.
  auto limited = test::run_shell("bash -c 'ulimit -f 64; exec " + test::bin_dir() + "/" + runs[0].second + " --output " +
                                 (dir / "n") + "' 2>&1");
  INFO(limited.out);
  CHECK(limited.code == 1);
  CHECK_THAT(limited.out, Catch::Contains("error: "));
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "n")) {
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
}

TEST_CASE("hostile: SIGTERM to lmkit-suite stops its running app too, exit 3, and a second call finishes",
          "[apps][hostile][suite]") {
  test::TempDir dir;
  pretrain_bert_tiny(dir);
  const std::string suite = test::bin_dir() + "/lmkit-suite --suite " + fixture_file("suite/tiny.json") + " --checkpoint " +
                            (dir / "pre/final") + " --output " + (dir / "out") + " --tasks ner --threads 1";
  // Signalled once the finetuning run has started (its log exists).
  auto stopped = test::run_shell("bash -c '" + suite + " > " + (dir / "suite.log") + " 2>&1 & pid=$!; " +
                                 "for i in $(seq 300); do ls " + (dir / "out/logs") + "/*.log >/dev/null 2>&1 && break; " +
                                 "sleep 0.05; done; sleep 0.3; kill -TERM $pid; wait $pid; echo \"exit $?\"'");
  const std::string log = read_file(dir / "suite.log");
  INFO(stopped.out << "\n" << log);
  CHECK_THAT(stopped.out, Catch::Contains("exit 3"));
  CHECK_THAT(log, Catch::Contains("lmkit-suite: stopped by SIGTERM during ner seed 1"));
  // No orphan: nothing of the suite runs on in the output directory.
  // ("[-]-output": the pattern does not match the shell that runs pgrep.)
  auto orphans = test::run_shell("pgrep -f -- '[-]-output " + (dir / "out") + "/' | wc -l");
  CHECK(std::stoi(orphans.out) == 0);
  auto again = test::run_shell(suite + " 2>&1");
  INFO(again.out);
  CHECK(again.code == 0);
}

TEST_CASE("hostile: a stopped run directory moved elsewhere resumes there", "[apps][hostile]") {
  test::TempDir dir;
  const std::string cmd = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::source_dir() +
                          "/data/wikitext-2-sample/valid.txt --vocab-size 400 --steps 4 --save-every 2 --batch-size 2 "
                          "--seq-len 16 --threads 1 --output ";
  auto first = run(cmd + (dir / "a") + " --stop-at 2");
  INFO(first.out);
  REQUIRE(first.code == 0);
  std::filesystem::rename(dir / "a", dir / "b");
  // The tokenizer it trained is recorded by its place in the run, not by the old path.
  auto resumed = run(cmd + (dir / "b") + " --resume");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(std::filesystem::exists(dir / "b/final/model.safetensors"));
}

TEST_CASE("hostile: a suite run whose data changed in place runs again", "[apps][hostile][suite]") {
  test::TempDir dir;
  pretrain_bert_tiny(dir);
  // The suite's files in a folder of the test's own, so that one can change.
  std::filesystem::create_directories(dir / "suite");
  std::filesystem::copy_file(fixture_file("suite/tiny.json"), dir / "suite/tiny.json");
  std::filesystem::copy(fixture_file("seq2seq"), dir / "seq2seq", std::filesystem::copy_options::recursive);
  const std::string suite = "lmkit-suite --suite " + (dir / "suite/tiny.json") + " --checkpoint " + (dir / "pre/final") +
                            " --output " + (dir / "out") + " --tasks sentiment --seeds 1 --threads 1";
  auto first = run(suite);
  INFO(first.out);
  REQUIRE(first.code == 0);
  auto same = run(suite);
  INFO(same.out);
  CHECK_THAT(same.out, Catch::Contains("sentiment seed 1: finished earlier"));
  std::ofstream(dir / "seq2seq/dev.tsv", std::ios::app) << "a film I liked\tpositive\n";
  auto changed = run(suite);
  INFO(changed.out);
  CHECK(changed.code == 0);
  CHECK_THAT(changed.out, Catch::Contains("sentiment seed 1: lmkit-finetune"));
}

TEST_CASE("hostile: two lmkit-tokenize encode into one new --output: the second is refused while the first writes",
          "[apps][hostile]") {
  test::TempDir dir;
  {
    std::ofstream big(dir / "big.txt");
    const std::string text = read_file(test::source_dir() + "/data/wikitext-2-sample/train.txt");
    for (int i = 0; i < 6; ++i) big << text;
  }
  const std::string encode = test::bin_dir() + "/lmkit-tokenize encode --tokenizer " +
                             (*test::data_fixture("bert").dir / "tok.model") + " --input " + (dir / "big.txt") +
                             " --output " + (dir / "corpus") + " --threads 1";
  // The second starts once the first holds the lock.
  auto r = test::run_shell("bash -c '" + encode + " > " + (dir / "first.log") + " 2>&1 & pid=$!; for i in $(seq 200); do " +
                           "[ -e " + (dir / ".corpus.lock") + " ] && break; sleep 0.01; done; " + encode + " 2>&1; " +
                           "echo \"second $?\"; wait $pid; echo \"first $?\"'");
  INFO(r.out << "\n" << read_file(dir / "first.log"));
  CHECK_THAT(r.out, Catch::Contains("second 1"));
  CHECK_THAT(r.out, Catch::Contains("is being written by another process"));
  CHECK_THAT(r.out, Catch::Contains("first 0"));
  CHECK(std::filesystem::exists(dir / "corpus/header.json"));
  CHECK_FALSE(std::filesystem::exists(dir / ".corpus.lock"));
}

TEST_CASE("tokenize train makes its output folders, as encode does (docs/data.md's first command)", "[apps][tokenize]") {
  test::TempDir dir;
  const std::string train = "lmkit-tokenize train --input " + test::source_dir() +
                            "/data/wikitext-2-sample/valid.txt --vocab-size 1000 --family bert --output ";
  auto as_dir = run(train + (dir / "tok/bert"));
  INFO(as_dir.out);
  CHECK(as_dir.code == 0);
  CHECK(std::filesystem::exists(dir / "tok/bert/tokenizer.model"));
  auto as_file = run(train + (dir / "new/sub/t.model"));
  INFO(as_file.out);
  CHECK(as_file.code == 0);
  CHECK(std::filesystem::exists(dir / "new/sub/t.model"));
  CHECK_THAT(as_file.out, !Catch::Contains("warning:"));
  // More pieces than the text holds: the tokenizer is smaller, and a warning says so (it was said as a count alone).
  auto fewer = run(train.substr(0, train.find("--vocab-size")) + "--vocab-size 8000 --family bert --output " + (dir / "big"));
  INFO(fewer.out);
  CHECK(fewer.code == 0);
  CHECK_THAT(fewer.out, Catch::Contains("warning: --vocab-size 8000: the training text gives ") &&
                            Catch::Contains(" pieces, so the tokenizer has "));
  // Below SentencePiece's 0.98 its trainer failed with "tokenizer training failed: " and nothing after it.
  auto coverage = run(train + (dir / "c") + " --character-coverage 0.9");
  CHECK(coverage.code == 2);
  CHECK_THAT(coverage.out, Catch::StartsWith("error: --character-coverage: 0.9 is out of range: must be in [0.98, 1]"));
}

namespace {

// Runs `args` (an app and its flags) in the background, waits until `ready` holds, then
// `delay_ms` later sends SIGTERM; returns the exit code and the app's output.
test::Run terminate_when(const std::string& args, const std::function<bool()>& ready, int delay_ms, const test::TempDir& dir) {
  const std::string code_file = dir / "term.code";
  const std::string pid = test::start_app(args, dir / "term.log", code_file);
  for (int i = 0; i < 1200 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  test::run_shell("pkill -TERM -P " + pid);
  const int code = test::wait_exit_code(code_file, 60);
  REQUIRE(code != -1);
  test::Run r{code, read_file(dir / "term.log")};
  std::filesystem::remove(code_file);
  return r;
}

int count_lines(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("hostile: SIGTERM during a finetuning run's dev generation stops it at once, and --resume validates that step first",
          "[apps][hostile]") {
  test::TempDir dir;
  // An untrained T5 rarely ends a sequence: 8 dev rows of up to 1500 new tokens take seconds.
  const std::string t5_tok = *test::data_fixture("t5").dir / "tok.model";
  const std::string args = "lmkit-finetune --task seq2seq --init random --model " + tiny_t5(dir) + " --tokenizer " + t5_tok +
                           " --train " + fixture_file("seq2seq/dev.tsv") + " --dev " + fixture_file("seq2seq/dev.tsv") +
                           " --max-length 24 --max-target-length 6 --max-new-tokens 1500 --beams 1 --epochs 2 --batch-size 4"
                           " --max-train-examples 4 --max-dev-examples 8 --threads 1 --output " + (dir / "ft");
  const std::string metrics = dir / "ft/metrics.jsonl";
  const auto stopped = terminate_when(args, [&] { return count_lines(metrics, "\"split\":\"train\"") >= 1; }, 200, dir);
  INFO(stopped.out);
  CHECK(stopped.code == 3);
  CHECK_THAT(stopped.out, Catch::Contains("interrupted by SIGTERM during the validation of step 1: checkpoint") &&
                              Catch::Contains("(it validates step 1 first)"));
  CHECK(count_lines(metrics, "\"split\":\"valid\"") == 0);
  CHECK(load_json_file(dir / "ft/checkpoints/step-1/trainer_state.json").value("validation_pending", false));
  const auto resumed = run(args + " --resume");
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("validating step 1 first"));
  // Each step validated once, in order, and the run finished.
  std::vector<int64_t> validated;
  std::ifstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line);
    if (j["split"] == "valid") validated.push_back(j["step"].get<int64_t>());
  }
  CHECK(validated == std::vector<int64_t>{1, 2});
  CHECK(std::filesystem::exists(dir / "ft/result.json"));
  CHECK(std::filesystem::exists(dir / "ft/predictions.txt"));

  // lmkit-evaluate's generation stops between decoding steps too, and writes nothing.
  const std::string eval = "lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + fixture_file("seq2seq/dev.tsv") +
                           " --metric generation --max-new-tokens 1500 --beams 1 --batch-size 1 --threads 1 --output " +
                           (dir / "eval.json") + " --predictions " + (dir / "eval.txt");
  const auto eval_stopped = terminate_when(eval, [] { return true; }, 3000, dir);
  INFO(eval_stopped.out);
  CHECK(eval_stopped.code == 3);
  CHECK_THAT(eval_stopped.out, Catch::Contains("interrupted by SIGTERM during generation: nothing written"));
  CHECK(!std::filesystem::exists(dir / "eval.json"));
  CHECK(!std::filesystem::exists(dir / "eval.txt"));
}
