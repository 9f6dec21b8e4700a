// lmkit-finetune and lmkit-evaluate end to end.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"

using namespace lmkit;
using test::run;

namespace {
std::string preset(const std::string& name) { return test::source_dir() + "/models/" + name + ".json"; }

void write_separable(const std::string& path) {
  std::ofstream out(path);
  out << "sentence\tlabel\n";
  const char* good[] = {"great wonderful excellent", "wonderful great", "excellent film , great", "great great"};
  const char* bad[] = {"awful terrible horrible", "terrible awful", "horrible film , awful", "awful awful"};
  for (int i = 0; i < 4; ++i) out << good[i] << "\tpos\n" << bad[i] << "\tneg\n";
}

// lmkit-finetune of a random bert-tiny on the separable set in dir (train = dev) into dir/OUT.
test::Run finetune_separable(const test::TempDir& dir, const std::string& out, const std::string& extra) {
  const auto& f = test::data_fixture("bert");
  write_separable(dir / "train.tsv");
  return run("lmkit-finetune --init random --model " + preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
             " --train " + (dir / "train.tsv") + " --dev " + (dir / "train.tsv") + " --output " + (dir / out) + " " + extra);
}
}  // namespace

TEST_CASE("finetune: a separable set reaches 100% and evaluate reproduces the dev accuracy", "[apps][finetune]") {
  test::TempDir dir;
  auto r = finetune_separable(dir, "ft", "--epochs 15 --lr 1e-3 --batch-size 4 --max-length 16 --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json result = load_json_file(dir / "ft/result.json");
  CHECK(result["accuracy"].get<double>() == 1.0);
  for (const char* file : {"best/model.safetensors", "best/label_map.json", "best/tokenizer.model", "predictions.tsv"}) {
    CHECK(std::filesystem::exists(dir / "ft/" + file));
  }
  CHECK(load_json_file(dir / "ft/best/label_map.json") == Json({{"neg", 0}, {"pos", 1}}));
  auto e = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + (dir / "train.tsv") +
               " --metric classification --output " + (dir / "eval.json") + " --threads 1");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const Json ev = load_json_file(dir / "eval.json");
  CHECK(ev["accuracy"] == result["accuracy"]);
  CHECK(ev["mcc"].get<double>() == Approx(result["mcc"].get<double>()));
  // Evaluation defaults to the length the classifier was finetuned with (finetune.json),
  // not its own 128: the same examples, so the same loss.
  CHECK(load_json_file(dir / "ft/best/finetune.json")["max_length"] == 16);
  CHECK(ev["max_length"] == 16);
  CHECK(ev["loss"].get<double>() == Approx(result["loss"].get<double>()).epsilon(1e-5));
}

TEST_CASE("finetune: --dtype bf16 trains under autocast and still separates the set", "[apps][finetune]") {
  test::TempDir dir;
  auto r = finetune_separable(dir, "ft", "--epochs 15 --lr 1e-3 --batch-size 4 --max-length 16 --threads 1 --dtype bf16");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(load_json_file(dir / "ft/result.json")["accuracy"].get<double>() == 1.0);
  auto bad = finetune_separable(dir, "ft2", "--dtype fp16");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--dtype"));
}

TEST_CASE("evaluate: bad classification input is one error line and exit 2", "[apps][finetune]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  write_separable(dir / "train.tsv");
  REQUIRE(run("lmkit-finetune --init random --model " + preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
              " --train " + (dir / "train.tsv") + " --dev " + (dir / "train.tsv") + " --output " + (dir / "ft") +
              " --epochs 1 --batch-size 4 --max-length 16 --threads 1")
              .code == 0);
  { std::ofstream(dir / "odd.tsv") << "sentence\tlabel\ngreat\tpos\nmeh\tmaybe\n"; }
  { std::ofstream(dir / "nocol.tsv") << "text\tlabel\ngreat\tpos\n"; }
  // A pretraining checkpoint (no classification head) with a tokenizer.
  REQUIRE(run("lmkit-pretrain --model " + preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --tokenizer " +
              (*f.dir / "tok.model") + " --output " + (dir / "pre") + " --steps 1 --batch-size 2 --seq-len 16 --threads 1")
              .code == 0);
  // A finetuned checkpoint without its label map, or with one that does not fit the head.
  std::filesystem::copy(dir / "ft/best", dir / "nomap");
  std::filesystem::remove(dir / "nomap/label_map.json");
  std::filesystem::copy(dir / "ft/best", dir / "badmap");
  { std::ofstream(dir / "badmap/label_map.json", std::ios::trunc) << R"({"neg": 0, "pos": 7})"; }
  std::filesystem::copy(dir / "ft/best", dir / "shortmap");
  { std::ofstream(dir / "shortmap/label_map.json", std::ios::trunc) << R"({"neg": 0})"; }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--checkpoint " + (dir / "nomap") + " --data " + (dir / "train.tsv") + " --metric classification",
       "no label_map.json (lmkit-finetune writes one)"},
      {"--checkpoint " + (dir / "badmap") + " --data " + (dir / "train.tsv") + " --metric classification",
       "label_map.json: label 'pos' maps to class 7, but the model has 2 classes"},
      {"--checkpoint " + (dir / "shortmap") + " --data " + (dir / "train.tsv") + " --metric classification",
       "label_map.json: names 1 labels but the model has 2 classes"},
      {"--checkpoint " + (dir / "ft/best") + " --data " + (dir / "odd.tsv") + " --metric classification",
       "odd.tsv:3: label 'maybe' is not in the label map"},
      {"--checkpoint " + (dir / "ft/best") + " --data " + (dir / "nocol.tsv") + " --metric classification",
       "no column 'sentence'"},
      {"--checkpoint " + (dir / "pre/final") + " --data " + (dir / "train.tsv") + " --metric classification",
       "has no classification head"},
      {"--checkpoint " + (dir / "pre/final") + " --data " + (dir / "train.tsv") + " --metric perplexity",
       "--metric perplexity does not apply to a bert checkpoint (use mlm-perplexity, pseudo-perplexity)"},
      {"--checkpoint " + (dir / "ft/best") + " --data " + (dir / "none.tsv") + " --metric classification",
       "none.tsv: no such file"},
      {"--checkpoint " + (dir / "ft/best") + " --data " + (dir / "train.tsv") + " --metric accuracy",
       "--metric 'accuracy' is not one of"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run("lmkit-evaluate " + args + " --output " + (dir / "r.json"));
    INFO(args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("error: ") && Catch::Contains(message));
  }
  // Finetuning data errors are caught the same way.
  auto bad = run("lmkit-finetune --init random --model " + preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
                 " --train " + (dir / "train.tsv") + " --dev " + (dir / "odd.tsv") + " --output " + (dir / "ft2"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("label 'maybe' is not in the label map"));
}
