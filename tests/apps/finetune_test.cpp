// lmkit-finetune and lmkit-evaluate end to end.
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
  return run("lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
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
  // The same rows as .tsv.gz and .jsonl.gz (HF datasets' compressed files) score the same; a binary file is named
  // as one (it was read as text: "no column 'sentence' (columns: ...its bytes...)").
  {
    std::ifstream in(dir / "train.tsv");
    std::ofstream out(dir / "train.jsonl");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      out << Json{{"sentence", line.substr(0, line.find('\t'))}, {"label", line.substr(line.find('\t') + 1)}}.dump() << "\n";
    }
  }
  REQUIRE(test::run_shell("gzip -k " + (dir / "train.tsv") + " " + (dir / "train.jsonl")).code == 0);
  for (const char* file : {"train.tsv.gz", "train.jsonl.gz"}) {
    auto z = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + (dir / file) +
                 " --metric classification --output " + (dir / (std::string(file) + ".json")) + " --threads 1");
    INFO(z.out);
    REQUIRE(z.code == 0);
    const Json zj = load_json_file(dir / (std::string(file) + ".json"));
    CHECK(zj["loss"] == ev["loss"]);
    CHECK(zj["examples"] == ev["examples"]);
  }
  { std::ofstream(dir / "binary.tsv", std::ios::binary) << std::string("sentence\tlabel\n\x01\x00\xff\xfe\tpos\n", 20); }
  auto b = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + (dir / "binary.tsv") +
               " --metric classification --output " + (dir / "b.json") + " --threads 1");
  CHECK(b.code == 2);
  CHECK_THAT(b.out, Catch::StartsWith("error: ") && Catch::Contains("binary.tsv: holds NUL bytes: not a text file"));
  {  // one past the first 64 KiB, which the format's sniff reads
    std::ofstream late(dir / "late.tsv", std::ios::binary);
    late << "sentence\tlabel\n";
    for (int i = 0; i < 5000; ++i) late << "great wonderful excellent\tpos\n";
    late << std::string("awful\0\tneg\n", 10);
  }
  auto l = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + (dir / "late.tsv") +
               " --metric classification --output " + (dir / "l.json") + " --threads 1");
  CHECK(l.code == 2);
  CHECK_THAT(l.out, Catch::StartsWith("error: ") && Catch::Contains("late.tsv:5002: a NUL byte: not a text file"));
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
  REQUIRE(run("lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
              " --train " + (dir / "train.tsv") + " --dev " + (dir / "train.tsv") + " --output " + (dir / "ft") +
              " --epochs 1 --batch-size 4 --max-length 16 --threads 1")
              .code == 0);
  { std::ofstream(dir / "odd.tsv") << "sentence\tlabel\ngreat\tpos\nmeh\tmaybe\n"; }
  { std::ofstream(dir / "nocol.tsv") << "text\tlabel\ngreat\tpos\n"; }
  // A pretraining checkpoint (no classification head) with a tokenizer.
  REQUIRE(run("lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --tokenizer " +
              (*f.dir / "tok.model") + " --output " + (dir / "pre") + " --steps 1 --batch-size 2 --seq-len 16 --threads 1")
              .code == 0);
  // config.json names the classes as the label map does (HF's pipelines read id2label), so a
  // checkpoint without label_map.json still evaluates...
  CHECK(load_json_file(dir / "ft/best/config.json")["id2label"].size() == 2);
  std::filesystem::copy(dir / "ft/best", dir / "named");
  std::filesystem::remove(dir / "named/label_map.json");
  auto named = run("lmkit-evaluate --checkpoint " + (dir / "named") + " --data " + (dir / "train.tsv") +
                   " --metric classification --output " + (dir / "named.json"));
  INFO(named.out);
  CHECK(named.code == 0);
  // ...but not one whose config names them LABEL_i alone, nor one whose label map does not fit the head.
  std::filesystem::copy(dir / "ft/best", dir / "nomap");
  std::filesystem::remove(dir / "nomap/label_map.json");
  {
    Json config = load_json_file(dir / "nomap/config.json");
    config["id2label"] = {{"0", "LABEL_0"}, {"1", "LABEL_1"}};
    config["label2id"] = {{"LABEL_0", 0}, {"LABEL_1", 1}};
    save_json_file(dir / "nomap/config.json", config);
  }
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
       "none.tsv: cannot open file"},
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
  auto bad = run("lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") +
                 " --train " + (dir / "train.tsv") + " --dev " + (dir / "odd.tsv") + " --output " + (dir / "ft2"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("label 'maybe' is not in the label map"));
}

namespace {
std::string ner(const std::string& name) { return test::source_dir() + "/tests/fixtures/ner/" + name; }
}  // namespace

TEST_CASE("finetune: token classification learns the NER fixture and evaluate reproduces its dev scores", "[apps][finetune][tokcls]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  auto r = run("lmkit-finetune --task token-classification --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " +
               (*f.dir / "tok.model") + " --train " + ner("train.conll") + " --dev " + ner("dev.conll") + " --output " +
               (dir / "ft") + " --epochs 4 --lr 2e-3 --batch-size 16 --max-length 24 --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json result = load_json_file(dir / "ft/result.json");
  CHECK(result["task"] == "token-classification");
  CHECK(result["f1"].get<double>() > 0.5);  // random init, 60 steps: well above the 0 of predicting O everywhere
  CHECK(result["per_type"].contains("PER"));
  CHECK(load_json_file(dir / "ft/best/config.json")["architectures"][0] == "BertForTokenClassification");
  CHECK(load_json_file(dir / "ft/best/label_map.json").size() == 8);
  // predictions.conll: word gold predicted, the dev file's words and tags in order.
  std::ifstream conll(dir / "ft/predictions.conll");
  std::string word, gold, predicted;
  conll >> word >> gold >> predicted;
  CHECK(word == "It");
  CHECK(gold == "O");
  // The JSONL copy of the dev set, read as the finetuned model reads it, gives the same figures.
  auto e = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + ner("dev.jsonl") +
               " --metric token-classification --output " + (dir / "eval.json") + " --predictions " +
               (dir / "eval.conll") + " --threads 1");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const Json ev = load_json_file(dir / "eval.json");
  for (const char* key : {"f1", "precision", "recall", "accuracy"}) CHECK(ev[key] == result[key]);
  CHECK(ev["loss"].get<double>() == Approx(result["loss"].get<double>()).epsilon(1e-5));
  CHECK(read_file(dir / "eval.conll") == read_file(dir / "ft/predictions.conll"));
}

TEST_CASE("finetune: bad token-classification input is one error line and exit 2", "[apps][finetune][tokcls]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  { std::ofstream(dir / "short.conll") << "John B-PER\nlives\n"; }
  { std::ofstream(dir / "unseen.conll") << "Paris B-CITY\n"; }
  const std::string base = "lmkit-finetune --task token-classification --init random --model " + test::model_preset("bert-tiny") +
                           " --tokenizer " + (*f.dir / "tok.model") + " --epochs 1 --threads 1 --train ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + (dir / "short.conll") + " --dev " + ner("dev.conll") + " --output " + (dir / "a"), "short.conll:2: 1 column(s)"},
      {base + ner("train.conll") + " --dev " + (dir / "unseen.conll") + " --output " + (dir / "b"),
       "unseen.conll:1: tag 'B-CITY'"},
      {base + ner("train.conll") + " --dev " + ner("dev.conll") + " --output " + (dir / "c") + " --label-column 0",
       "--label-column 0"},
      {base + ner("train.conll") + " --dev " + ner("dev.conll") + " --output " + (dir / "d") + " --regression",
       "--regression applies to --task classification"},
      {"lmkit-finetune --task token-classification --init random --model " + test::model_preset("transformer-small") + " --tokenizer " +
           (*f.dir / "tok.model") + " --train " + ner("train.conll") + " --dev " + ner("dev.conll") + " --output " + (dir / "e"),
       "has no token-classification head"},
  };
  for (const auto& [cmd, message] : cases) {
    const auto r = run(cmd);
    INFO(cmd << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("error: ") && Catch::Contains(message));
  }
}

namespace {
std::string s2s(const std::string& name) { return test::source_dir() + "/tests/fixtures/seq2seq/" + name; }

// A two-layer model of `type` small enough to finetune text-to-text in seconds.
std::string tiny_generator(const test::TempDir& dir, const std::string& type) {
  const std::string path = dir / (type + ".json");
  std::ofstream out(path);
  if (type == "t5") {
    out << R"({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
               "num_heads": 4, "feed_forward_proj": "relu", "tie_word_embeddings": true})";
  } else {
    out << R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64})";
  }
  return path;
}
}  // namespace

TEST_CASE("finetune: text-to-text T5 and GPT-2 learn the sentiment fixture and evaluate reproduces them",
          "[apps][finetune][seq2seq]") {
  for (const std::string type : {"t5", "gpt2"}) {
    const auto& f = test::data_fixture(type);
    test::TempDir dir;
    auto r = run("lmkit-finetune --task seq2seq --init random --model " + tiny_generator(dir, type) + " --tokenizer " +
                 (*f.dir / "tok.model") + " --train " + s2s("train.tsv") + " --dev " + s2s("dev.tsv") + " --output " +
                 (dir / "ft") + " --epochs 5 --lr 3e-3 --batch-size 16 --max-length 32 --max-target-length 8 " +
                 "--best-metric exact_match --threads 1");
    INFO(type << "\n" << r.out);
    REQUIRE(r.code == 0);
    const Json result = load_json_file(dir / "ft/result.json");
    CHECK(result["task"] == "seq2seq");
    CHECK(result["exact_match"].get<double>() >= 90.0);  // random init learns the two answers in 65 steps
    CHECK(result["examples"] == 40);
    const auto lines = read_lines(dir / "ft/predictions.txt");
    REQUIRE(lines.size() == 40);
    CHECK((lines[0] == "positive" || lines[0] == "negative"));
    CHECK(load_json_file(dir / "ft/best/finetune.json")["decoder_only"] == (type == "gpt2"));
    // The JSONL copy of the dev set, read and generated as finetuned, gives the same texts and figures.
    auto e = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + s2s("dev.jsonl") +
                 " --metric generation --output " + (dir / "eval.json") + " --predictions " + (dir / "eval.txt") +
                 " --batch-size 7 --threads 1");
    INFO(e.out);
    REQUIRE(e.code == 0);
    const Json ev = load_json_file(dir / "eval.json");
    for (const char* key : {"bleu", "exact_match", "f1", "rouge1", "rouge2", "rougeL"}) CHECK(ev[key] == result[key]);
    CHECK(read_file(dir / "eval.txt") == read_file(dir / "ft/predictions.txt"));
    if (type == "t5") {  // parallel files (Multi30k's layout) read the same rows
      auto p = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + s2s("dev") +
                   " --source-lang src --target-lang tgt --metric generation --output " + (dir / "par.json") + " --threads 1");
      INFO(p.out);
      REQUIRE(p.code == 0);
      CHECK(load_json_file(dir / "par.json")["exact_match"] == result["exact_match"]);
    }
  }
}

TEST_CASE("finetune: bad text-to-text input is one error line and exit 2", "[apps][finetune][seq2seq]") {
  const auto& f = test::data_fixture("t5");
  test::TempDir dir;
  { std::ofstream(dir / "empty.tsv") << "source\ttarget\na b\t\n"; }
  const std::string gpt = tiny_generator(dir, "gpt2");
  const std::string base = "lmkit-finetune --task seq2seq --init random --tokenizer " + (*f.dir / "tok.model") +
                           " --epochs 1 --threads 1 --max-length 32 --max-target-length 8 --model ";
  const std::string data = " --train " + s2s("train.tsv") + " --dev " + s2s("dev.tsv");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + gpt + " --train " + (dir / "empty.tsv") + " --dev " + s2s("dev.tsv") + " --output " + (dir / "a"),
       "empty.tsv:2: empty target"},
      {base + gpt + data + " --target-column label --output " + (dir / "b"), "train.tsv:1: no column 'label'"},
      {base + test::model_preset("bert-tiny") + data + " --output " + (dir / "c"), "has no text-to-text head"},
      {test::with_flag(base + gpt + data, "--max-target-length", "40") + " --output " + (dir / "d"),
       "exceeds the model's 64 positions"},
      {base + gpt + data + " --max-new-tokens 9 --output " + (dir / "e"), "--max-new-tokens 9 exceeds --max-target-length 8"},
      {base + gpt + data + " --source-lang de --output " + (dir / "f"), "need both --source-lang and --target-lang"},
      {"lmkit-finetune --init random --model " + test::model_preset("bert-tiny") + " --tokenizer " + (*f.dir / "tok.model") + data +
           " --output " + (dir / "g") + " --source-prefix x",
       "--source-prefix applies to --task seq2seq"},
  };
  for (const auto& [cmd, message] : cases) {
    const auto r = run(cmd);
    INFO(cmd << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("error: ") && Catch::Contains(message));
  }
}

TEST_CASE("evaluate: in-context metrics on a GPT, several tasks in one call, and their bad input",
          "[apps][evaluate][icl]") {
  test::TempDir dir;
  const std::string icl = test::source_dir() + "/tests/fixtures/icl/";
  { std::ofstream(dir / "gpt.json") << R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 64})"; }
  auto p = run("lmkit-pretrain --model " + (dir / "gpt.json") + " --train " + test::source_dir() +
               "/data/wikitext-2-sample/valid.txt --output " + (dir / "gpt") + " --vocab-size 600 --steps 2 --batch-size 4 "
               "--seq-len 32 --threads 1");
  REQUIRE(p.code == 0);
  const std::string gpt = dir / "gpt/final";
  auto r = run("lmkit-evaluate --checkpoint " + gpt + " --metric in-context --data " + icl + " --shots 2 --output " +
               (dir / "icl.json") + " --predictions " + (dir / "icl.jsonl") + " --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("multiple_choice") && Catch::Contains("lambada"));
  const Json result = load_json_file(dir / "icl.json");
  REQUIRE(result["tasks"].size() == 4);  // the directory's four files, in name order
  CHECK(result["tasks"][0]["task"] == "completion");
  CHECK(result["tasks"][2]["accuracy_norm"].is_number());
  CHECK(read_lines(dir / "icl.jsonl").size() == 16 + 12 + 24 + 16);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--metric completion --data " + icl + "schema.jsonl", "a multiple-choice task, not --metric completion"},
      {"--metric multiple-choice --data " + icl + "completion.jsonl", "a completion task, not --metric multiple-choice"},
      {"--metric in-context --data " + (dir / "missing.jsonl"), "missing.jsonl: no such file"},
      {"--metric perplexity --data " + icl + "schema.jsonl --data " + icl + "schema.jsonl", "--data is repeatable"},
  };
  for (const auto& [args, message] : cases) {
    const auto e = run("lmkit-evaluate --checkpoint " + gpt + " " + args + " --output " + (dir / "x.json"));
    INFO(args << "\n" << e.out);
    CHECK(e.code == 2);
    CHECK_THAT(e.out, Catch::StartsWith("error: ") && Catch::Contains(message));
  }
  // A classifier is not a causal language model.
  auto c = finetune_separable(dir, "cls", "--epochs 1 --threads 1");
  REQUIRE(c.code == 0);
  const auto e = run("lmkit-evaluate --checkpoint " + (dir / "cls/best") + " --metric multiple-choice --data " + icl +
                     "schema.jsonl --output " + (dir / "y.json"));
  CHECK(e.code == 2);
  // Every family with a causal LM objective is named (the built-in four, and a plugin's).
  CHECK_THAT(e.out, Catch::Contains("scores causal language models (GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM or "
                                    "BloomForCausalLM), not BertForSequenceClassification"));
}

namespace {
std::string squad(const std::string& name) { return test::source_dir() + "/tests/fixtures/squad/" + name; }
}  // namespace

TEST_CASE("finetune: question answering trains on SQuAD v2.0 windows and evaluate reproduces its dev scores",
          "[apps][finetune][squad]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  auto r = run("lmkit-finetune --task question-answering --init random --model " + test::model_preset("bert-tiny") +
               " --tokenizer " + (*f.dir / "tok.model") + " --train " + squad("train.json") + " --dev " + squad("dev.json") +
               " --output " + (dir / "ft") + " --epochs 1 --batch-size 32 --max-length 64 --max-query-length 24 --doc-stride 16"
               " --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json result = load_json_file(dir / "ft/result.json");
  CHECK(result["task"] == "question-answering");
  CHECK(result["squad_version"] == "v2.0");
  CHECK(result["total"] == 16);
  CHECK(result["NoAns_total"] == 4);
  CHECK(result["windows"].get<int64_t>() > 16);  // long contexts: several windows a question
  CHECK(load_json_file(dir / "ft/best/config.json")["architectures"][0] == "BertForQuestionAnswering");
  const Json info = load_json_file(dir / "ft/best/finetune.json");
  CHECK(info["doc_stride"] == 16);
  CHECK(info["version_2_with_negative"] == true);
  const Json predictions = load_json_file(dir / "ft/predictions.json");
  CHECK(predictions.size() == 16);
  // As finetuned (windows, stride, thresholds from finetune.json): the same answers and figures.
  auto e = run("lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --data " + squad("dev.json") + " --metric squad --output " +
               (dir / "eval.json") + " --predictions " + (dir / "eval.pred.json") + " --threads 1");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const Json ev = load_json_file(dir / "eval.json");
  for (const char* key : {"exact", "f1", "HasAns_f1", "NoAns_exact", "windows"}) CHECK(ev[key] == result[key]);
  CHECK(load_json_file(dir / "eval.pred.json") == predictions);
  // Bad input: one error line naming the question, the flag or the head.
  { std::ofstream(dir / "moved.json") << R"({"data": [{"paragraphs": [{"context": "in 1984 .", "qas": [{"id": "x", "question": "when ?", "answers": [{"text": "1984", "answer_start": 0}]}]}]}]})"; }
  const std::string eval = "lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --metric squad --threads 1 --output " + (dir / "bad.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {eval + " --data " + (dir / "moved.json"), "question 'x': answer '1984' is not at character 0 of its context"},
      {eval + " --data " + squad("dev.json") + " --seq-len 64 --doc-stride 60", "--doc-stride 60 must be below"},
      {eval + " --data " + squad("cases.json"), "not SQuAD's JSON"},
      {"lmkit-evaluate --checkpoint " + (dir / "ft/best") + " --metric classification --data " + squad("dev.json") +
           " --output " + (dir / "c.json"), "has no classification head"},
  };
  for (const auto& [args, message] : cases) {
    auto b = run(args);
    INFO(args << "\n" << b.out);
    CHECK(b.code == 2);
    CHECK_THAT(b.out, Catch::StartsWith("error: ") && Catch::Contains(message));
  }
}
