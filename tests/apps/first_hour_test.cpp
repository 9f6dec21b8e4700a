// A researcher's first hour (#43): quick variants of every long command, outputs that
// are not replaced by surprise, runs that keep what they need, one key style, help and
// output a person reads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"

using namespace lmkit;
using test::run;
namespace fs = std::filesystem;

namespace {

// Eight separable rows (train = dev): a random bert-tiny learns them in a few epochs.
std::string separable(const test::TempDir& dir) {
  const std::string path = dir / "set.tsv";
  std::ofstream out(path);
  out << "sentence\tlabel\n";
  const char* good[] = {"great wonderful excellent", "wonderful great", "excellent film , great", "great great"};
  const char* bad[] = {"awful terrible horrible", "terrible awful", "horrible film , awful", "awful awful"};
  for (int i = 0; i < 4; ++i) out << good[i] << "\tpos\n" << bad[i] << "\tneg\n";
  return path;
}

std::string finetune_args(const test::TempDir& dir, const std::string& out) {
  const std::string set = separable(dir);
  return "lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " +
         (*test::data_fixture("bert").dir / "tok.model") + " --train " + set + " --dev " + set +
         " --epochs 2 --batch-size 4 --max-length 16 --threads 1 --output " + (dir / out);
}

size_t lines_of(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("first hour: --max-dev-examples and --max-eval-examples take the first N examples", "[apps][first-hour]") {
  test::TempDir dir;
  auto r = run(finetune_args(dir, "ft") + " --max-dev-examples 3");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(load_json_file(dir / "ft/result.json")["examples"] == 3);
  CHECK(lines_of(dir / "ft/predictions.tsv") == 4);  // a header and three rows
  const std::string eval = "lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + (dir / "set.tsv") + " --threads 1 ";
  r = run(eval + "--metric classification --max-eval-examples 5 --output " + (dir / "five.json"));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(load_json_file(dir / "five.json")["examples"] == 5);
  // A corpus metric has no examples to count: an error that says what to do instead.
  r = run(eval + "--metric mlm-perplexity --max-eval-examples 5 --output " + (dir / "mlm.json"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("error: --max-eval-examples applies to --metric bleu, multiple-choice, completion, "
                                      "in-context, classification, token-classification, generation, squad, image-classification, not mlm-perplexity "
                                      "(give a shorter --data file)"));
}

TEST_CASE("first hour: best/ and final/ carry no optimizer state, and --keep best keeps best/ alone and resumes",
          "[apps][first-hour]") {
  test::TempDir dir;
  auto r = run(finetune_args(dir, "all"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(!fs::exists(dir / "all/best/optimizer.pt"));
  CHECK(!fs::exists(dir / "all/final/optimizer.pt"));
  CHECK(fs::exists(dir / "all/best/model.safetensors"));
  const std::string step = read_file(dir / "all/checkpoints/latest");
  CHECK(fs::exists(dir / "all/checkpoints/" + step.substr(0, step.find('\n')) + "/optimizer.pt"));

  r = run(finetune_args(dir, "best") + " --keep best");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(fs::exists(dir / "best/best/model.safetensors"));
  CHECK(!fs::exists(dir / "best/final"));
  CHECK(!fs::exists(dir / "best/checkpoints"));
  const Json first = load_json_file(dir / "best/result.json");
  CHECK(first["kept"] == "best");
  // Nothing to resume from, yet the run is finished: --resume evaluates best/ again.
  r = run(finetune_args(dir, "best") + " --keep best --resume");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("finished earlier (--keep best): evaluating best/"));
  const Json again = load_json_file(dir / "best/result.json");
  CHECK(again["accuracy"] == first["accuracy"]);
  CHECK(again["best_epoch"] == first["best_epoch"]);
  CHECK(!fs::exists(dir / "best/checkpoints"));
  // Changed flags are refused as they are for a --keep all run, not silently ignored.
  std::string more_epochs = finetune_args(dir, "best");
  more_epochs.replace(more_epochs.find("--epochs 2"), 10, "--epochs 3");
  for (const std::string& changed : {more_epochs + " --keep best", finetune_args(dir, "best") + " --keep best --lr 1e-3",
                                    finetune_args(dir, "best") + " --keep all"}) {
    r = run(changed + " --resume");
    INFO(changed << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("error: --resume with flags that differ from"));
  }
}

TEST_CASE("first hour: lmkit-evaluate's result.json is replaced by the same evaluation only", "[apps][first-hour]") {
  test::TempDir dir;
  REQUIRE(run(finetune_args(dir, "ft")).code == 0);
  std::ofstream(dir / "other.tsv") << "sentence\tlabel\ngreat\tpos\nawful\tneg\n";
  const std::string eval = "cd " + (dir / "") + " && " + test::bin_dir() + "/lmkit-evaluate --checkpoint ft/best --threads 1 "
                           "--metric classification --data ";
  auto r = test::run_shell(eval + "set.tsv 2>&1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(load_json_file(dir / "result.json")["data"] == "set.tsv");
  // The aligned table: the header names what was evaluated, no quoted fragments.
  CHECK_THAT(r.out, Catch::StartsWith("classification of ft/best on set.tsv\n") && Catch::Contains("  accuracy ") &&
                        !Catch::Contains("\""));
  CHECK(test::run_shell(eval + "set.tsv 2>&1").code == 0);  // the same evaluation again
  r = test::run_shell(eval + "other.tsv 2>&1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("error: the default --output result.json holds another evaluation (classification "
                                      "of ft/best on set.tsv): give --output FILE for this one, or --overwrite"));
  CHECK(load_json_file(dir / "result.json")["data"] == "set.tsv");
  CHECK(test::run_shell(eval + "other.tsv --output other.json 2>&1").code == 0);
}

TEST_CASE("first hour: --config keys take _ or - as suite files do, and two keys for one flag are an error",
          "[apps][first-hour]") {
  test::TempDir dir;
  const std::string pretrain = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --tokenizer " +
                               (*test::data_fixture("bert").dir / "tok.model") + " --train " +
                               test::sample("valid.txt") + " --steps 1 --seq-len 16 --threads 1 --config ";
  std::ofstream(dir / "under.json") << R"({"batch_size": 2, "log_every": 1})";
  auto r = run(pretrain + (dir / "under.json") + " --output " + (dir / "u"));
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(load_json_file(dir / "u/config.json")["batch-size"] == "2");
  std::ofstream(dir / "both.json") << R"({"batch_size": 2, "batch-size": 3})";
  r = run(pretrain + (dir / "both.json") + " --output " + (dir / "b"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("keys 'batch-size' and 'batch_size' name one flag (--batch-size)"));
  std::ofstream(dir / "typo.json") << R"({"batch_sise": 2})";
  r = run(pretrain + (dir / "typo.json") + " --output " + (dir / "t"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("unknown key 'batch_sise' (did you mean 'batch-size'?)"));
}

TEST_CASE("first hour: help shows every default and negatable flags plainly", "[apps][first-hour]") {
  const auto evaluate = run("lmkit-evaluate --help");
  CHECK(evaluate.code == 0);
  CHECK_THAT(evaluate.out, Catch::Contains("--rouge-stemmer, --no-rouge-stemmer") && !Catch::Contains("{false}") &&
                               !Catch::Contains("{true}"));
  CHECK_THAT(evaluate.out, Catch::Contains("sequences per batch (default: 8)"));
  const auto generate = run("lmkit-generate --help");
  CHECK_THAT(generate.out, Catch::Contains("tokens to generate at most (default: "));
  const auto finetune = run("lmkit-finetune --help");
  CHECK_THAT(finetune.out, Catch::Contains("INT:> 0") && !Catch::Contains("=32") && Catch::Contains("(default: 32)"));
}

TEST_CASE("first hour: lmkit-forward runs on lmkit-tokenize inspect --dump and prints a line per tensor", "[apps][first-hour]") {
  test::TempDir dir;
  const auto& f = test::data_fixture("bert");
  auto r = run("lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
               " --train " + test::sample("valid.txt") + " --steps 1 --batch-size 2 --seq-len 16 --threads 1 --output " +
               (dir / "pre"));
  REQUIRE(r.code == 0);
  r = run("lmkit-tokenize inspect --tokenizer " + (dir / "pre/final") + " --corpus " + f.corpus_path +
          " --objective mlm+nsp --seq-len 16 --batch-size 2 --batches 1 --dump " + (dir / "in.safetensors"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  r = run("lmkit-forward --checkpoint " + (dir / "pre/final") + " --inputs " + (dir / "in.safetensors") + " --output " +
          (dir / "out.safetensors") + " --threads 1");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\n  logits ") && Catch::Contains("[2, 16, ") && Catch::Contains("\n  loss "));
  r = run("lmkit-forward --checkpoint " + (dir / "pre/final") + " --inputs " + (dir / "in.safetensors") + " --output " +
          (dir / "grad.safetensors") + " --gradients --threads 1");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("parameter gradients, HF's parameter names)"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') < 20);
}

TEST_CASE("evaluate: --seq-len N scores non-overlapping windows of N, and past learned positions it is an error",
          "[apps][evaluate]") {
  test::TempDir dir;
  std::ofstream(dir / "gpt.json") << R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 64})";
  std::ofstream(dir / "llama.json") << R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32})";
  // GPT-2 with the fixture's tokenizer; Llama trains its own (SentencePiece BPE, <s> </s>).
  const std::string gpt_tok = " --tokenizer " + (*test::data_fixture("gpt2").dir / "tok.model");
  for (const std::string family : {"gpt", "llama"}) {
    auto r = run("lmkit-pretrain --model " + (dir / (family + ".json")) + (family == "gpt" ? gpt_tok : " --vocab-size 1000") +
                 " --train " + test::sample("valid.txt") + " --steps 1 --batch-size 2 --seq-len 16 --threads 1 --output " +
                 (dir / family));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  const std::string eval = " --data " + test::sample("valid.txt") + " --metric perplexity --threads 1 --output ";
  auto r = run("lmkit-evaluate --checkpoint " + (dir / "gpt/final") + eval + (dir / "g32.json") + " --seq-len 32");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json g = load_json_file(dir / "g32.json");
  CHECK(g["context"] == 32);
  CHECK(g["stride"] == 32);
  r = run("lmkit-evaluate --checkpoint " + (dir / "gpt/final") + eval + (dir / "g128.json") + " --seq-len 128");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: --seq-len 128 exceeds the model's 64 positions (n_positions)"));
  r = run("lmkit-evaluate --checkpoint " + (dir / "gpt/final") + eval + (dir / "gx.json") + " --seq-len 32 --context 16");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--seq-len N is --context N --stride N for perplexity: --seq-len 32 and --context 16 disagree"));
  // Rotary positions have no end: four times the configured length is scored.
  r = run("lmkit-evaluate --checkpoint " + (dir / "llama/final") + eval + (dir / "l128.json") + " --seq-len 128");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(load_json_file(dir / "l128.json")["context"] == 128);
}

TEST_CASE("tokenize: --family llama trains Llama's BPE with <unk> <s> </s>, and refuses --model-type unigram",
          "[apps][tokenize]") {
  test::TempDir dir;
  const std::string train = "lmkit-tokenize train --input " + test::sample("valid.txt") + " --vocab-size 1000 --family llama";
  auto r = run(train + " --output " + (dir / "tok"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json hf = load_json_file(dir / "tok/tokenizer.json");
  CHECK(hf["model"]["type"] == "BPE");
  CHECK(hf["model"]["byte_fallback"] == true);
  r = run("lmkit-tokenize ids --tokenizer " + (dir / "tok") + " --input " + test::sample("valid.txt"));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("{\"ids\":[1,"));  // <s> first, as HF's LlamaTokenizerFast
  r = run(train + " --model-type unigram --output " + (dir / "uni"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("error: --model-type unigram: the llama family trains bpe"));
}

TEST_CASE("tokenize: a trained tokenizer is the same whatever the machine's cores or OMP_NUM_THREADS", "[apps][tokenize]") {
  test::TempDir dir;
  // SentencePiece sums its threads' counts: 1 thread and 2 order some pieces differently. The default
  // was every core, or OMP_NUM_THREADS (torchrun's 1 a rank): a tokenizer that depended on the machine.
  const std::string train = test::bin_dir() + "/lmkit-tokenize train --input " + test::sample("valid.txt") +
                            " --vocab-size 1000 --family gpt2 --output ";
  for (const char* threads : {"1", "2"}) {
    const auto r = test::run_shell("OMP_NUM_THREADS=" + std::string(threads) + " " + train + (dir / threads) + " 2>&1");
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  REQUIRE(test::run(train.substr(test::bin_dir().size() + 1) + (dir / "one") + " --threads 1").code == 0);
  const std::string json = "/tokenizer.json";
  CHECK(read_file(dir / "1" + json) == read_file(dir / "2" + json));
  CHECK(read_file(dir / "one" + json) != read_file(dir / "2" + json));  // the count matters: --threads 1 is another tokenizer
}
