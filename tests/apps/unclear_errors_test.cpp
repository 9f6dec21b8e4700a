// Errors that say what is wrong and where (the fourth hostile round): a --config or suite
// file's bad value names the file and key, a config's model_type names its file, a word
// that is no subcommand is named, a missing checkpoint is called missing. Each is one
// `error:` line and exit 2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct ErrorCase {
  std::string file;     // written to DIR/in.json first ("" for none)
  std::string command;  // DIR is replaced
  std::string error;    // a regular expression for the line after "error: " (DIR replaced, escaped)
};

std::string with_dir(std::string s, const std::string& dir) {
  for (size_t at = s.find("DIR"); at != std::string::npos; at = s.find("DIR", at + dir.size())) s.replace(at, 3, dir);
  return s;
}

}  // namespace

TEST_CASE("unclear errors: config, suite, model_type, subcommand and checkpoint errors name what and where",
          "[apps][hostile]") {
  test::TempDir dir;
  const std::string d = dir / "";
  const std::string escaped = std::regex_replace(d, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  const std::string pretrain = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " +
                               test::sample("valid.txt") + " --output DIRrun --threads 1 --config DIRin.json";
  const std::vector<ErrorCase> cases = {
      {R"({"steps": 2.5})", pretrain, "DIRin\\.json: key 'steps' must be an integer, not 2\\.5"},
      {R"({"seed": -3})", pretrain, "DIRin\\.json: key 'seed' must be a non-negative integer, not -3"},
      {R"({"config": "other.json"})", pretrain, "DIRin\\.json: key 'config': a config file cannot name another one"},
      {R"({"plugin": "p.so"})", pretrain, "DIRin\\.json: key 'plugin': plugins load before the config file is read.*"},
      {R"({"model_type": 5})", "lmkit-info DIRin.json", "DIRin\\.json: key 'model_type' must be a string \\(.*\\), not 5"},
      {R"({"model_type": "bogus"})", "lmkit-pretrain --model DIRin.json --train " + test::sample("valid.txt") +
       " --output DIRrun2 --threads 1", "DIRin\\.json: unknown model_type 'bogus' \\(expected .*\\)"},
      {R"({"defaults": {"seeds": [1.5]}, "tasks": [{"name": "a", "type": "classification", "train": "t", "dev": "d"}]})",
       "lmkit-suite --suite DIRin.json --checkpoint DIRnone --output DIRsuite --dry-run",
       "DIRin\\.json: defaults\\.seeds must be a non-empty list of non-negative integers"},
      {"", "lmkit-tokenize bogus", "'bogus' is not a subcommand of lmkit-tokenize \\(train, encode, ids or inspect\\)"},
      {"", "lmkit-evaluate --checkpoint DIRnone --metric perplexity --data " + test::sample("valid.txt") +
       " --output DIRe.json", "--checkpoint DIRnone: no such checkpoint directory"},
      {"", "lmkit-generate --checkpoint DIRnone --prompt hello", "--checkpoint DIRnone: no such checkpoint directory"},
      {"", "lmkit-finetune --checkpoint DIRnone --train " + test::sample("valid.txt") + " --dev " +
       test::sample("valid.txt") + " --output DIRft2", "--checkpoint DIRnone: no such checkpoint directory"},
  };
  for (const ErrorCase& c : cases) {
    if (!c.file.empty()) std::ofstream(dir / "in.json") << c.file;
    const std::string command = with_dir(c.command, d);
    INFO(command << "\n" << c.file);
    auto r = test::run(command);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(std::regex_match(r.out, std::regex("error: " + with_dir(c.error, escaped) + "\n")));
  }
}

TEST_CASE("unclear errors: a flag in --config and on the command line is the command line's, and resumes",
          "[apps][hostile]") {
  test::TempDir dir;
  std::ofstream(dir / "run.json") << R"({"steps": 5, "batch_size": 4})";
  const std::string cmd = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " +
                          test::sample("valid.txt") + " --output " + (dir / "run") + " --vocab-size 2000 --seq-len 32" +
                          " --threads 1 --config " + (dir / "run.json") + " --steps 2";
  auto first = test::run(cmd);
  INFO(first.out);
  REQUIRE(first.code == 0);
  const Json config = load_json_file(dir / "run/config.json");
  CHECK(config["steps"] == "2");
  CHECK(config["batch-size"] == "4");
  auto again = test::run(cmd + " --resume");
  INFO(again.out);
  CHECK(again.code == 0);
  CHECK_THAT(again.out, Catch::Contains("already finished"));
}

TEST_CASE("unclear errors: tokenize train past a file-size limit leaves no half tokenizer behind", "[apps][hostile]") {
  test::TempDir dir;
  const std::string train = test::bin_dir() + "/lmkit-tokenize train --input " + test::sample("valid.txt") +
                            " --vocab-size 2000 --family bert --threads 1 --output " + (dir / "tok");
  // 64 KiB: the SentencePiece model fits, the HF tokenizer.json written after it does not.
  auto limited = test::run_shell("bash -c 'ulimit -f 64; " + train + "' 2>&1");
  INFO(limited.out);
  CHECK(limited.code == 1);
  CHECK(std::regex_search(limited.out, std::regex("(^|\n)error: .*tok/.*\n$")));
  CHECK_FALSE(fs::exists(dir / "tok/tokenizer.model"));
  CHECK_FALSE(fs::exists(dir / "tok/tokenizer.json"));
  // 4 KiB: SentencePiece's own files do not fit. It said "tokenizer training failed: " (nothing
  // after it) and exit 2, as if the input were wrong.
  auto small = test::run_shell("bash -c 'ulimit -f 4; " + train + "' 2>&1");
  INFO(small.out);
  CHECK(small.code == 1);
  CHECK_THAT(small.out, Catch::Contains("error: " + (dir / "tok/tokenizer.model") + ": the trained tokenizer could not be written (") &&
                            Catch::Contains("a full disk or a file-size limit?)"));
  CHECK(std::regex_search(small.out, std::regex("^(warning: [^\n]*\n)*error: [^\n]*\n$")));  // one error line, last
  CHECK_FALSE(fs::exists(dir / "tok"));  // the folder the command made goes with its failure
  // The same command without the limit needs no --overwrite.
  auto again = test::run_shell(train + " 2>&1");
  INFO(again.out);
  CHECK(again.code == 0);
}

TEST_CASE("unclear errors: a metrics or TensorBoard write that fails mid-run says why", "[apps][hostile]") {
  // "writing the TensorBoard event file failed", without the reason.
  test::TempDir dir;
  const auto& f = test::data_fixture("bert");
  const std::string tok = *f.dir / "tok.model";
  REQUIRE(test::run("lmkit-tokenize encode --tokenizer " + tok + " --input " + test::sample("valid.txt") + " --output " +
                    (dir / "corpus")).code == 0);
  // 40 KiB: the corpus and the model fit; the logs of 400 steps, one line a step, do not.
  const std::string train = test::bin_dir() + "/lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --tokenizer " +
                            tok + " --train " + (dir / "corpus") + " --output " + (dir / "r") +
                            " --steps 400 --batch-size 4 --seq-len 32 --threads 1 --log-every 1 --save-every 100000";
  auto limited = test::run_shell("bash -c 'ulimit -f 40; " + train + "' 2>&1");
  INFO(limited.out);
  CHECK(limited.code == 1);
  // The event file that fills first is one warning line and the run goes on; metrics.jsonl, which
  // holds every record, ends it: the model's line, at most that warning, then the error's.
  CHECK(std::regex_search(limited.out, std::regex("^[^\n]*\n"
                                                  "(warning: [^\n]*/events\\.out\\.tfevents\\.[^\n]*File too large[^\n]*"
                                                  "no more TensorBoard events in this run[^\n]*\n)?"
                                                  "error: [^\n]*/metrics\\.jsonl: write failed \\(File too large\\)\n$")));
}

TEST_CASE("unclear errors: --help tells the truth and exits 0", "[apps][hostile]") {
  auto dist = test::run("lmkit-dist-check --help");
  CHECK(dist.code == 0);
  CHECK_THAT(dist.out, Catch::Contains("torchrun"));
  auto generate = test::run("lmkit-generate --help");
  CHECK(generate.code == 0);
  CHECK_THAT(generate.out, Catch::Contains("beam search with B beams (default: greedy decoding)"));
  auto finetune = test::run("lmkit-finetune --help");
  CHECK(std::regex_search(finetune.out, std::regex(R"(target \(default:\s+\\n\))")));
  auto pretrain = test::run("lmkit-pretrain --help");
  CHECK_THAT(pretrain.out, Catch::Contains("--config FILE") && Catch::Contains("tokenizer directory, PATH.model or tokenizer.json"));
  auto evaluate = test::run("lmkit-evaluate --help");
  CHECK_THAT(evaluate.out, !Catch::Contains("in-context: in-context"));
  test::TempDir dir;
  auto train = test::run("lmkit-tokenize train --input " + test::sample("valid.txt") + " --vocab-size 1000 --family bert" +
                         " --threads 1 --output " + (dir / "tok"));
  INFO(train.out);
  CHECK_THAT(train.out, Catch::Contains("specials [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4"));
}
