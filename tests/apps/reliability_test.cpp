// Nothing lost, nothing silently wrong (docs/training.md, Guarantees): outputs
// that would replace a user's files, checkpoints that would load with a random
// head or non-finite weights, inputs that would hang, data read silently wrong,
// and a stop signal that would lose the run. Each case failed before its fix.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/data/tasks.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/registry.h"

using namespace lmkit;
using test::run;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A short bert-tiny pretraining run on the sample's valid split.
std::string pretrain_args(const std::string& out, int steps) {
  return "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --output " + out +
         " --vocab-size 2000 --steps " + std::to_string(steps) + " --batch-size 4 --seq-len 32 --lr 1e-3 --warmup 1 --threads 1";
}

// A bert-tiny checkpoint (ARCH) with the BERT fixture's tokenizer in DIR.
std::shared_ptr<models::Model> bert_checkpoint(const std::string& dir, const std::string& arch, int64_t num_labels = 0) {
  const auto& f = test::data_fixture("bert");
  Json config = load_json_file(test::model_preset("bert-tiny"));
  config["vocab_size"] = f.tok->vocab_size();
  if (num_labels) config["num_labels"] = num_labels;
  auto model = models::create_model(config, "bert-tiny.json", arch);
  models::save_pretrained(*model, dir, [&](const std::string& tmp) { f.tok->save(tmp); });
  return model;
}

// The tensors of DIR/model.safetensors, some replaced or left out.
void rewrite_weights(const std::string& dir, const std::function<bool(const std::string&, at::Tensor&)>& keep) {
  const auto file = io::read_safetensors(dir + "/model.safetensors");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto [name, tensor] : file.tensors) {
    at::Tensor t = tensor.clone();
    if (keep(name, t)) out.emplace_back(name, t);
  }
  io::write_safetensors(dir + "/model.safetensors", out);
}

}  // namespace

TEST_CASE("reliability: lmkit-tokenize encode replaces only its own corpus, and only with --overwrite", "[apps][reliability]") {
  test::TempDir dir;
  const auto& f = test::data_fixture("bert");
  const std::string tok = *f.dir / "tok.model", text = test::sample("valid.txt");
  const std::string encode = "lmkit-tokenize encode --tokenizer " + tok + " --input " + text + " --threads 1 --output ";
  // A folder of the user's files: it used to be deleted, notes.txt with it.
  fs::create_directories(dir / "mine");
  write(dir / "mine/notes.txt", "mine");
  for (const std::string extra : {"", " --overwrite"}) {
    const auto r = run(encode + (dir / "mine") + extra);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("error: --output " + (dir / "mine") + ": exists and is not a token corpus"));
    CHECK(read_file(dir / "mine/notes.txt") == "mine");
  }
  // A regular file, and the tokenizer's own folder.
  write(dir / "file.txt", "keep");
  CHECK(run(encode + (dir / "file.txt")).code == 2);
  CHECK(read_file(dir / "file.txt") == "keep");
  CHECK(run(encode + f.dir->path.string()).code == 2);
  CHECK(fs::exists(tok));
  // An earlier corpus: refused without --overwrite, replaced with it.
  REQUIRE(run(encode + (dir / "corpus")).code == 0);
  const auto again = run(encode + (dir / "corpus"));
  CHECK(again.code == 2);
  CHECK_THAT(again.out, Catch::Contains("a token corpus is already there; give --overwrite"));
  // A killed encode's temporary (its process gone) is removed by the next one.
  fs::create_directories(dir / ".corpus.tmp.999999");
  REQUIRE(run(encode + (dir / "corpus") + " --overwrite").code == 0);
  CHECK_FALSE(fs::exists(dir / ".corpus.tmp.999999"));
  CHECK(fs::exists(dir / "corpus/header.json"));
}

TEST_CASE("reliability: a fresh run into a used run directory needs --resume or --overwrite", "[apps][reliability]") {
  test::TempDir dir;
  REQUIRE(run(pretrain_args(dir / "r", 4) + " --save-every 1 --keep-last 5").code == 0);
  REQUIRE(fs::exists(dir / "r/checkpoints/step-1"));
  const auto again = run(pretrain_args(dir / "r", 2));
  CHECK(again.code == 2);
  CHECK_THAT(again.out, Catch::Contains("holds an earlier run") && Catch::Contains("--overwrite to replace it"));
  CHECK(fs::exists(dir / "r/checkpoints/step-4"));
  // --overwrite replaces the earlier run whole: none of its checkpoints stay beside the new one's.
  const auto fresh = run(pretrain_args(dir / "r", 2) + " --overwrite");
  INFO(fresh.out);
  REQUIRE(fresh.code == 0);
  CHECK_FALSE(fs::exists(dir / "r/checkpoints/step-4"));
  CHECK_FALSE(fs::exists(dir / "r/checkpoints/step-1"));
  CHECK(load_json_file(dir / "r/result.json")["steps"] == 2);
  CHECK(run(pretrain_args(dir / "r", 2) + " --overwrite --resume").code == 2);
  // A folder with files lmkit did not write is refused whatever the flags, and left as it was.
  fs::create_directories(dir / "mine");
  write(dir / "mine/config.json", "{\"mine\": 1}");
  for (const std::string extra : {"", " --overwrite", " --resume"}) {
    const auto r = run(pretrain_args(dir / "mine", 2) + extra);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("holds files lmkit did not write (config.json)"));
  }
  CHECK(read_file(dir / "mine/config.json") == "{\"mine\": 1}");
  // A file where the run directory should be, and a path through a file: one line, exit 2.
  write(dir / "file", "x");
  for (const std::string& out : {dir / "file", dir / "file/run"}) {
    const auto r = run(pretrain_args(out, 2));
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("error: --output " + out + ": cannot create the directory"));
  }
  // A run that fails on its input before training leaves its tokenizer and cache, which are no run:
  // the command run again with the input fixed trains there without --overwrite (it was refused).
  // (A bad --valid: the tokenizer is trained and --train encoded before it is read; a bad --train
  // JSONL fails as the tokenizer's training text is read, before anything is written.)
  write(dir / "bad.jsonl", "{\"text\": \"A first document .\"}\n{not json}\n");
  const auto failed = run(pretrain_args(dir / "early", 2) + " --valid " + (dir / "bad.jsonl"));
  CHECK(failed.code == 2);
  CHECK_THAT(failed.out, Catch::Contains("bad.jsonl:2: malformed JSON"));
  REQUIRE(fs::exists(dir / "early/cache"));
  const auto fixed = run(pretrain_args(dir / "early", 2));
  INFO(fixed.out);
  CHECK(fixed.code == 0);
  // lmkit-finetune keeps the same rule.
  const auto ft = run("lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + (dir / "r/tokenizer.model") +
                      " --train x.tsv --dev x.tsv --output " + (dir / "mine"));
  CHECK(ft.code == 2);
  CHECK_THAT(ft.out, Catch::Contains("holds files lmkit did not write"));
}

TEST_CASE("reliability: SIGTERM finishes the step, checkpoints it exactly, exits 3, and --resume goes on", "[apps][reliability]") {
  test::TempDir dir;
  const std::string args = pretrain_args(dir / "r", 100000) + " --log-every 1";
  const std::string pid = test::start_app(args, dir / "log", dir / "code");
  auto logged_steps = [&] {
    std::ifstream in(dir / "r/metrics.jsonl");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find("\"split\":\"train\"") != std::string::npos;
    return n;
  };
  for (int i = 0; i < 1200 && logged_steps() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(logged_steps() >= 3);
  test::run_shell("pkill -TERM -P " + pid);
  const int code = test::wait_exit_code(dir / "code", 60);
  const std::string log = read_file(dir / "log");
  INFO(log);
  CHECK(code == 3);
  CHECK_THAT(log, Catch::Contains("interrupted by SIGTERM after step ") && Catch::Contains("continue with the same command and --resume"));
  CHECK_THAT(log, !Catch::Contains("error:"));
  std::string latest = read_file(dir / "r/checkpoints/latest");
  latest = latest.substr(0, latest.find('\n'));
  const int step = std::stoi(latest.substr(5));
  CHECK(step >= 3);
  // Resumed from it, the run goes on exactly as an uninterrupted one: the same losses and
  // bitwise the same weights three steps later.
  const std::string end = std::to_string(step + 3);
  const auto resumed = run(args + " --resume --stop-at " + end);
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resuming from") && Catch::Contains(latest));
  REQUIRE(run(pretrain_args(dir / "ref", 100000) + " --log-every 1 --stop-at " + end).code == 0);
  CHECK(read_file(dir / "r/checkpoints/step-" + end + "/model.safetensors") ==
        read_file(dir / "ref/checkpoints/step-" + end + "/model.safetensors"));
  auto losses = [](const std::string& run_dir) {
    std::vector<double> out;
    std::ifstream in(run_dir + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const Json j = Json::parse(line);
      if (j["split"] == "train") out.push_back(j["loss"].get<double>());
    }
    return out;
  };
  CHECK(losses(dir / "r") == losses(dir / "ref"));
  CHECK(losses(dir / "r").size() == static_cast<size_t>(step + 3));
}

TEST_CASE("reliability: SIGTERM while a corpus is encoded stops the encoding at once, exit 3, and leaves nothing half-written",
          "[apps][reliability]") {
  // It ended the process (exit 143, no line said what became of the run), leaving the partial corpus.
  test::TempDir dir;
  const auto& f = test::data_fixture("bert");
  const std::string tok = *f.dir / "tok.model", big = dir / "big.txt";
  {
    const std::string text = read_file(test::sample("train.txt"));
    std::ofstream out(big, std::ios::binary);
    for (int i = 0; i < 20; ++i) out << text;  // 20 MB: seconds to encode on one thread
  }
  // Started, signalled once its temporary directory (in `where`) exists; the exit code and log.
  auto interrupted = [&](const std::string& args, const fs::path& where, const std::string& name) {
    const std::string pid = test::start_app(args, dir / (name + ".log"), dir / (name + ".code"));
    auto writing = [&] {
      std::error_code ec;
      if (!fs::is_directory(where, ec)) return false;
      for (const auto& e : fs::directory_iterator(where, ec)) {
        if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
      }
      return false;
    };
    for (int i = 0; i < 1200 && !writing(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    REQUIRE(writing());
    const auto signalled = std::chrono::steady_clock::now();
    test::run_shell("pkill -TERM -P " + pid);
    const int code = test::wait_exit_code(dir / (name + ".code"), 60);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
    CHECK(seconds < 3.0);  // between chunks of a batch, not after the batch (the whole file here)
    return std::make_pair(code, read_file(dir / (name + ".log")));
  };
  const auto [code, log] = interrupted("lmkit-tokenize encode --tokenizer " + tok + " --input " + big +
                                           " --threads 1 --output " + (dir / "corpus"), dir.path, "encode");
  INFO(log);
  CHECK(code == 3);
  CHECK_THAT(log, Catch::Contains("interrupted by SIGTERM during the encoding of " + big + ": nothing written"));
  CHECK_THAT(log, !Catch::Contains("error:"));
  CHECK_FALSE(fs::exists(dir / "corpus"));
  for (const auto& e : fs::directory_iterator(dir.path)) CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  // lmkit-pretrain encoding its --train into the run's cache: no step was trained, so it says there is nothing to resume.
  const std::string pretrain = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --tokenizer " + tok +
                               " --train " + big + " --output " + (dir / "r") + " --steps 2 --batch-size 4 --seq-len 32 --threads 1";
  const auto [pcode, plog] = interrupted(pretrain, dir / "r/cache", "pretrain");
  INFO(plog);
  CHECK(pcode == 3);
  CHECK_THAT(plog, Catch::Contains("interrupted by SIGTERM during the encoding of " + big +
                                   ": training had not started, so there is nothing to resume"));
  CHECK_THAT(plog, !Catch::Contains("error:"));
  CHECK(fs::is_empty(dir / "r/cache"));
}

TEST_CASE("reliability: SIGTERM while a tokenizer is trained stops it at once, exit 3, and SIGKILL takes the trainer too",
          "[apps][reliability]") {
  // SentencePiece's trainer cannot be stopped: lmkit-tokenize train ended at the signal (exit 143, no line), and
  // lmkit-pretrain waited for the whole training (84 s on a 54 MB text) before it stopped. It runs in a child process now.
  test::TempDir dir;
  const std::string big = dir / "big.txt";
  {
    const std::string text = read_file(test::sample("train.txt"));
    std::ofstream out(big, std::ios::binary);
    for (int i = 0; i < 5; ++i) out << text;  // 5 MB: seconds of training on one thread
  }
  // Started, and signalled once the app has its trainer's process; the exit code, the log, the trainer's pid.
  auto signalled = [&](const std::string& args, const std::string& name, const char* signal) {
    const std::string shell = test::start_app(args, dir / (name + ".log"), dir / (name + ".code"));
    std::string app, trainer;
    for (int i = 0; i < 1200 && trainer.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      app = test::run_shell("pgrep -P " + shell + " | head -1").out;
      if (!app.empty()) trainer = test::run_shell("pgrep -P " + app.substr(0, app.find('\n'))).out;
    }
    REQUIRE_FALSE(trainer.empty());
    const auto at = std::chrono::steady_clock::now();
    test::run_shell(std::string("pkill -") + signal + " -P " + shell);
    const int code = test::wait_exit_code(dir / (name + ".code"), 60);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count() < 3.0);
    return std::make_tuple(code, read_file(dir / (name + ".log")), trainer.substr(0, trainer.find('\n')));
  };
  auto gone = [&](const std::string& pid) {
    for (int i = 0; i < 100; ++i) {
      if (test::run_shell("kill -0 " + pid + " 2>/dev/null").code != 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  const std::string train = "lmkit-tokenize train --family bert --vocab-size 8000 --threads 1 --input " + big + " --output ";
  const auto [code, log, trainer] = signalled(train + (dir / "tok"), "train", "TERM");
  INFO(log);
  CHECK(code == 3);
  CHECK_THAT(log, Catch::Contains("interrupted by SIGTERM during tokenizer training: nothing written (" + (dir / "tok") +
                                  " is as it was)"));
  CHECK_THAT(log, !Catch::Contains("error:"));
  CHECK(gone(trainer));
  CHECK_FALSE(fs::exists(dir / "tok"));  // the folder it had made for the tokenizer went too
  for (const auto& e : fs::directory_iterator(dir.path)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  // Killed outright, the app takes its trainer with it (no orphan training on, writing its files).
  const auto [kcode, klog, ktrainer] = signalled(train + (dir / "killed"), "killed", "KILL");
  CHECK(kcode == 137);
  CHECK(gone(ktrainer));
  // lmkit-pretrain training the run's tokenizer: no step was trained, so nothing to resume.
  const std::string pretrain = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --vocab-size 8000 --train " +
                               big + " --output " + (dir / "r") + " --steps 2 --batch-size 4 --seq-len 32 --threads 1";
  const auto [pcode, plog, ptrainer] = signalled(pretrain, "pretrain", "TERM");
  INFO(plog);
  CHECK(pcode == 3);
  CHECK_THAT(plog, Catch::Contains("interrupted by SIGTERM during tokenizer training: training had not started, so there "
                                   "is nothing to resume"));
  CHECK(gone(ptrainer));
  CHECK_FALSE(fs::exists(dir / "r/tokenizer.model"));
}

TEST_CASE("reliability: SIGTERM while lmkit-finetune or -evaluate reads its examples stops the reading, exit 3",
          "[apps][reliability]") {
  // lmkit-finetune ended at the signal (exit 143, no line) while it read and tokenized --train (25 s for
  // 400,000 rows here); lmkit-evaluate read all of --data before its first check.
  test::TempDir dir;
  const auto& f = test::data_fixture("bert");
  const std::string tok = *f.dir / "tok.model", big = dir / "big.tsv", dev = test::source_dir() + "/tests/fixtures/text/sst2.dev.tsv";
  {
    const std::string text = read_file(dev);
    const std::string rows = text.substr(text.find('\n') + 1);
    std::ofstream out(big, std::ios::binary);
    out << text;
    for (int i = 0; i < 150; ++i) out << rows;  // 130,000 rows: seconds to prepare on one thread
  }
  // Started, signalled 0.3 s after its output's lock file appears (the reading follows at once).
  auto interrupted = [&](const std::string& args, const fs::path& lock, const std::string& name) {
    const std::string pid = test::start_app(args, dir / (name + ".log"), dir / (name + ".code"));
    for (int i = 0; i < 1200 && !fs::exists(lock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(fs::exists(lock));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto at = std::chrono::steady_clock::now();
    test::run_shell("pkill -TERM -P " + pid);
    const int code = test::wait_exit_code(dir / (name + ".code"), 60);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count() < 3.0);
    return std::make_pair(code, read_file(dir / (name + ".log")));
  };
  const std::string model = " --tokenizer " + tok + " --model " + test::model_preset("bert-tiny") + " --dev " + dev;
  const auto [code, log] = interrupted("lmkit-finetune --init random --train " + big + model + " --threads 1 --output " +
                                           (dir / "run"), dir / "run/.lock", "finetune");
  INFO(log);
  CHECK(code == 3);
  CHECK_THAT(log, Catch::Contains("interrupted by SIGTERM during the preparation of the examples: training had not started, "
                                  "so there is nothing to resume"));
  CHECK_THAT(log, !Catch::Contains("error:"));
  // lmkit-evaluate on a checkpoint finetuned on a few rows: it writes nothing.
  REQUIRE(run("lmkit-finetune --init random --train " + dev + model + " --threads 1 --epochs 1 --max-train-examples 32 "
              "--max-dev-examples 16 --output " + (dir / "small")).code == 0);
  const std::string out = dir / "eval.json";
  const auto [ecode, elog] = interrupted("lmkit-evaluate --checkpoint " + (dir / "small/best") + " --data " + big +
                                             " --metric classification --threads 1 --output " + out, dir / ".eval.json.lock", "evaluate");
  INFO(elog);
  CHECK(ecode == 3);
  CHECK_THAT(elog, Catch::Contains("interrupted by SIGTERM during the preparation of the examples: nothing written"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("reliability: steps skipped for a non-finite loss are said, counted, and stop a diverged run", "[apps][reliability]") {
  test::TempDir dir;
  // A rate of 1e30 turns bert-tiny's weights non-finite at its first update: step 2 on is skipped.
  const auto diverging = [&](int steps) {
    std::string args = pretrain_args(dir / "r", steps);
    return args.replace(args.find("--lr 1e-3"), 9, "--lr 1e30");
  };
  auto r = run(diverging(5) + " --valid " + test::sample("valid.txt") + " --eval-batches 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains(", valid loss nan (mlm_loss nan, mlm_perplexity nan"));  // printf gave "-nan"
  CHECK_THAT(r.out, Catch::Contains("trained 5 steps in ") && Catch::Contains(" (4 skipped: a non-finite loss or gradient): "));
  CHECK_THAT(r.out, Catch::Contains("warning: step 2: the loss (nan)"));
  CHECK(r.out.find("warning: step 3") == std::string::npos);  // one warning a run; the summary counts the rest
  CHECK(load_json_file(dir / "r/result.json")["skipped_steps"] == 4);
  // Ten in a row: the run stops with one error line, exit 1, rather than train on nothing.
  r = run(diverging(14) + " --overwrite");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("error: stopping at step 11: 10 consecutive steps had a non-finite loss or gradient"));
  // Finetuning whose epoch ends on a skipped step still evaluates it and keeps best/ (it failed
  // with "best: not a checkpoint directory": a skipped step went past its validation).
  write(dir / "set.tsv", "sentence\tlabel\ngreat film\tpos\nawful film\tneg\ngreat great\tpos\nawful awful\tneg\n");
  r = run("lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " +
          (*test::data_fixture("bert").dir / "tok.model") + " --train " + (dir / "set.tsv") + " --dev " + (dir / "set.tsv") +
          " --epochs 1 --batch-size 2 --max-length 8 --threads 1 --lr 1e30 --output " + (dir / "ft"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("best dev (epoch 1): accuracy ") && Catch::Contains("skipped: 1 of 2 steps"));
  CHECK(load_json_file(dir / "ft/result.json")["skipped_steps"] == 1);
}

TEST_CASE("reliability: a checkpoint that would load a random head, wrong layers or NaN is refused", "[apps][reliability]") {
  test::TempDir dir;
  write(dir / "text.txt", read_file(test::sample("valid.txt")).substr(0, 20000));
  const std::string mlm = " --data " + (dir / "text.txt") + " --metric mlm-perplexity --threads 1 --overwrite --output " + (dir / "e.json");
  // A finetuned classifier has no MLM head: its perplexity changed with --seed.
  bert_checkpoint(dir / "cls", "BertForSequenceClassification", 2);
  auto r = run("lmkit-evaluate --checkpoint " + (dir / "cls") + mlm);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("lacks") && Catch::Contains("cls.predictions") &&
                        Catch::Contains("a head it does not have would be random"));
  // A pretraining checkpoint whose cls.* tensors were removed.
  bert_checkpoint(dir / "pre", "BertForPreTraining");
  REQUIRE(run("lmkit-evaluate --checkpoint " + (dir / "pre") + mlm).code == 0);
  fs::copy(dir / "pre", dir / "headless");
  rewrite_weights(dir / "headless", [](const std::string& name, at::Tensor&) { return name.rfind("cls.", 0) != 0; });
  CHECK(run("lmkit-evaluate --checkpoint " + (dir / "headless") + mlm).code == 2);
  // pretrain --init on a classifier: refused unless --new-head says so.
  const std::string init = "lmkit-pretrain --init " + (dir / "cls") + " --train " + (dir / "text.txt") +
                           " --objective mlm --steps 1 --batch-size 2 --seq-len 32 --threads 1 --output ";
  r = run(init + (dir / "p1"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("a head it does not have would be random"));
  r = run(init + (dir / "p2") + " --new-head");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("start from random initialisation (cls.predictions"));
  // config.json with fewer layers than the weights hold.
  fs::copy(dir / "pre", dir / "layers");
  Json config = load_json_file(dir / "layers/config.json");
  config["num_hidden_layers"] = config["num_hidden_layers"].get<int64_t>() - 1;
  save_json_file(dir / "layers/config.json", config);
  r = run("lmkit-evaluate --checkpoint " + (dir / "layers") + mlm);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("config.json and model.safetensors disagree"));
  // A NaN weight is refused at load, and never written.
  fs::copy(dir / "pre", dir / "nan");
  rewrite_weights(dir / "nan", [](const std::string& name, at::Tensor& t) {
    if (name == "bert.embeddings.word_embeddings.weight") t[0][0] = NAN;
    return true;
  });
  r = run("lmkit-evaluate --checkpoint " + (dir / "nan") + mlm);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("holds NaN or Inf values"));
  auto model = bert_checkpoint(dir / "ok", "BertForPreTraining");
  {
    at::NoGradGuard no_grad;
    model->parameters()[0].view(-1)[0] = INFINITY;
  }
  CHECK_THROWS_WITH(models::save_pretrained(*model, dir / "inf"), Catch::Contains("holds NaN or Inf values"));
  CHECK_FALSE(fs::exists(dir / "inf"));
  // A tokenizer with more ids than the model's vocabulary.
  fs::copy(dir / "pre", dir / "small");
  config = load_json_file(dir / "small/config.json");
  config["vocab_size"] = 100;
  save_json_file(dir / "small/config.json", config);
  rewrite_weights(dir / "small", [](const std::string& name, at::Tensor& t) {
    if (t.dim() >= 1 && t.size(0) == 2000) t = t.narrow(0, 0, 100).contiguous();
    return true;
  });
  r = run("lmkit-evaluate --checkpoint " + (dir / "small") + mlm);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("the tokenizer has 2000 ids but the model's vocabulary only 100"));
}

TEST_CASE("reliability: hangs and raw library text become one line", "[apps][reliability]") {
  test::TempDir dir;
  // Unbounded threads printed nothing for minutes; a device read forever.
  auto r = run("lmkit-info --system --threads 100000");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: --threads 100000: at most") && Catch::Contains("per core"));
  bert_checkpoint(dir / "pre", "BertForPreTraining");
  r = run("lmkit-forward --checkpoint " + (dir / "pre") + " --inputs /dev/zero --output " + (dir / "o.safetensors"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("/dev/zero: not a regular file"));
  // Range errors: one short line naming the flag and the range (CLI11's ran to 330 characters).
  for (const std::string& args : {std::string("--batch-size 0"), std::string("--lr -1"), std::string("--keep-last 0")}) {
    r = run(pretrain_args(dir / "x", 2) + " " + args);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("is out of range: must be > 0"));
    CHECK(r.out.size() < 160);
  }
  r = run("lmkit-bench train --model " + test::model_preset("bert-tiny") + " --vocab-size 1 --steps 1 --warmup 0");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--vocab-size: 1 is out of range: must be in [128, 2147483648]"));
  // --seed -1 wrapped to 2^64-1; a list for a one-value key ran its last element; a string for a number.
  r = run(pretrain_args(dir / "x", 2) + " --seed -1");
  CHECK(r.code == 2);
  write(dir / "steps.json", "{\"steps\": [2, 3]}");
  r = run(pretrain_args(dir / "x", 2) + " --config " + (dir / "steps.json"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("key 'steps' takes one value, not a list"));
  write(dir / "lr.json", "{\"lr\": \"fast\"}");
  r = run(pretrain_args(dir / "x", 2) + " --config " + (dir / "lr.json"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("key 'lr' must be a number"));
  // JSON booleans give flags.
  write(dir / "flag.json", "{\"whole-word\": true, \"stop-at\": 1}");
  r = run(pretrain_args(dir / "flag", 2) + " --config " + (dir / "flag.json"));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(load_json_file(dir / "flag/config.json")["whole-word"] != load_json_file(dir / "flag/config.json")["resume"]);
  // A profile into a missing folder wrote nothing and exited 0.
  r = run("lmkit-bench train --model " + test::model_preset("bert-tiny") + " --steps 1 --warmup 0 --profile " + (dir / "no/t.json"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("the folder " + (dir / "no") + " does not exist"));
  // SentencePiece's "Internal: trainer_interface.cc(580) ... 200 vs 339".
  r = run("lmkit-tokenize train --input " + test::sample("valid.txt") + " --vocab-size 200 --family bert --output " + (dir / "t.model"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("pieces to start from (each character of the training text, and the 256 byte-fallback "
                                                    "pieces), more than the 200") &&
                        !Catch::Contains("trainer_interface"));
  // CUDA asked for where there is none (no GPU, or a build without CUDA: the sanitizers'): the
  // environment's fault, said as such.
  r = run("lmkit-info --system --device cuda");
  if (r.code == 1) {
    CHECK_THAT(r.out, Catch::Contains("no CUDA device is available on this machine") ||
                          Catch::Contains("this lmkit was built without CUDA"));
  } else {
    CHECK(r.code == 0);  // a machine with a GPU
  }
}

TEST_CASE("reliability: labelled files are read strictly, and CSV as RFC 4180", "[data][reliability]") {
  test::TempDir dir;
  data::ColumnSpec c;  // text "sentence", label "label"
  write(dir / "extra.tsv", "sentence\tlabel\na fine film\t1\na\tmovie\t0\n");
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "extra.tsv", c), Catch::Contains("extra.tsv:3: 3 columns, but the header has 2"));
  write(dir / "twice.tsv", "label\tsentence\tlabel\n1\tok\t0\n");
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "twice.tsv", c), Catch::Contains("names column 'label' twice"));
  for (const std::string label : {"null", "{\"a\":1}", "true", "[1]"}) {
    write(dir / "bad.jsonl", "{\"sentence\": \"ok\", \"label\": " + label + "}\n");
    CHECK_THROWS_WITH(data::read_labelled_rows(dir / "bad.jsonl", c), Catch::Contains("bad.jsonl:1: field 'label' must be a string or a number"));
  }
  write(dir / "num.jsonl", "{\"sentence\": \"ok\", \"label\": 1}\n{\"sentence\": \"no\", \"label\": \"x\"}\n");
  CHECK(data::read_labelled_rows(dir / "num.jsonl", c).size() == 2);
  // A quoted field may span lines; "" is a quote; \r\n line ends.
  write(dir / "multi.csv", "sentence,label\r\n\"first line\nsecond, \"\"quoted\"\"\",pos\r\nplain,neg\r\n");
  const auto rows = data::read_labelled_rows(dir / "multi.csv", c);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].text == "first line\nsecond, \"quoted\"");
  CHECK(rows[0].label == "pos");
  CHECK(rows[1].line == 4);
  write(dir / "open.csv", "sentence,label\n\"never closed,pos\n");
  CHECK_THROWS_WITH(data::read_labelled_rows(dir / "open.csv", c), Catch::Contains("open.csv:2: a quoted field is not closed"));
}

TEST_CASE("reliability: lmkit-tokenize inspect shows and dumps every objective on the demo corpus", "[apps][reliability]") {
  // It failed for every objective ("Expected a proper Tensor but got None") and no test caught it.
  test::TempDir dir;
  const std::string text = test::sample("valid.txt");
  for (const std::string family : {"bert", "gpt2", "t5"}) {
    const std::string tok = dir / (family + ".model"), corpus = dir / (family + "-corpus");
    REQUIRE(run("lmkit-tokenize train --input " + text + " --vocab-size 2000 --family " + family + " --output " + tok).code == 0);
    REQUIRE(run("lmkit-tokenize encode --tokenizer " + tok + " --input " + test::sample("train.txt") + " --output " + corpus).code == 0);
    const std::vector<std::string> objectives = family == "bert" ? std::vector<std::string>{"mlm", "mlm+nsp"}
                                                : family == "gpt2" ? std::vector<std::string>{"clm"}
                                                                   : std::vector<std::string>{"span"};
    for (const auto& objective : objectives) {
      const std::string dump = dir / (family + "-" + objective + ".safetensors");
      const auto r = run("lmkit-tokenize inspect --tokenizer " + tok + " --corpus " + corpus + " --objective " + objective +
                         " --seq-len 64 --batch-size 2 --batches 2 --dump " + dump);
      INFO(objective << "\n" << r.out);
      CHECK(r.code == 0);
      CHECK_THAT(r.out, Catch::Contains("batch 1") && Catch::Contains("[1] "));
      const auto file = io::read_safetensors(dump);
      CHECK(file.at("input_ids", dump).size(0) == 4);
      CHECK(file.at("attention_mask", dump).sum().item<int64_t>() > 0);
      CHECK(!file.get("special_ids").defined());  // lmkit-forward reads every tensor as an input
      CHECK(file.metadata.count("special_ids") == 1);
      CHECK(run("lmkit-tokenize inspect --tokenizer " + tok + " --corpus " + corpus + " --objective " + objective + " --dump " + dump)
                .code == 2);  // an existing dump is replaced only with --overwrite
    }
  }
}

TEST_CASE("reliability: one lmkit-evaluate writes an --output at a time, however the checkpoint is spelt",
          "[apps][reliability]") {
  test::TempDir dir;
  write(dir / "text.txt", read_file(test::sample("valid.txt")).substr(0, 20000));
  bert_checkpoint(dir / "pre", "BertForPreTraining");
  const std::string result = dir / "shared.json";
  const std::string mlm = " --data " + (dir / "text.txt") + " --metric mlm-perplexity --threads 1 --output " + result;
  {
    // Another evaluation holds the output (as a process of its own would): this one is refused, naming it.
    const OutputLock other(result);
    auto r = run("lmkit-evaluate --checkpoint " + (dir / "pre") + mlm);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("error: --output " + result + " is being written by another process (pid"));
    CHECK_FALSE(fs::exists(result));
  }
  REQUIRE(run("lmkit-evaluate --checkpoint " + (dir / "pre") + mlm).code == 0);
  // The same evaluation again, the checkpoint spelt absolute and with a trailing slash: its own result, replaced.
  const std::string spelt = fs::absolute(dir / "pre").string() + "/";
  auto again = run("lmkit-evaluate --checkpoint " + spelt + mlm);
  INFO(again.out);
  CHECK(again.code == 0);
  CHECK(load_json_file(result)["checkpoint"] == spelt);
}

TEST_CASE("reliability: a one-value flag given twice is refused by the names a user types", "[apps][reliability]") {
  test::TempDir dir;
  auto r = run(pretrain_args(dir / "x", 2) + " --steps 3");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: --steps is given 2 times (2, 3): it takes one value"));
  r = run(pretrain_args(dir / "x", 2) + " --reset-positions --no-reset-positions");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: --reset-positions / --no-reset-positions is given 2 times (true, false)"));
  CHECK_FALSE(fs::exists(dir / "x"));
}
