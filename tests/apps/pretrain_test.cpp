// lmkit-pretrain end to end on a small text: every objective learns and leaves
// a complete checkpoint; resumed runs equal uninterrupted ones; bad input is
// one error line and exit 2.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <caffe2/serialize/inline_container.h>

#include <filesystem>
#include <chrono>
#include <fstream>
#include <algorithm>
#include <thread>
#include <tuple>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/core/runtime.h"
#include "lmkit/models/registry.h"

using namespace lmkit;
using test::run;
namespace fs = std::filesystem;

namespace {

// The tensors of a torch::save archive (optimizer.pt), sorted: LibTorch writes an optimizer's
// state in the order of a hash map keyed by parameter address, and stamps a random id on every
// save, so two saves of equal state differ as files but hold the same tensors.
std::vector<std::string> archive_tensors(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  std::vector<std::string> out;
  for (const auto& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) != 0) continue;
    auto [data, size] = reader.getRecord(name);
    out.emplace_back(static_cast<const char*>(data.get()), size);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Json> metrics(const std::string& dir, const std::string& split) {
  std::vector<Json> out;
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line);
    if (j["split"] == split) out.push_back(j);
  }
  return out;
}

double mean_loss(const std::vector<Json>& lines, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += lines[i]["loss"].get<double>();
  return s / static_cast<double>(end - begin);
}

// A small, quick run: the 110 KB valid split as training text, a 2000-token tokenizer.
std::string base_args(const std::string& model, const std::string& out, int steps) {
  return "lmkit-pretrain --model " + test::model_preset(model) + " --train " + test::sample("valid.txt") + " --valid " + test::sample("valid.txt") +
         " --output " + out + " --vocab-size 2000 --steps " + std::to_string(steps) +
         " --batch-size 8 --seq-len 64 --lr 1e-3 --warmup 2 --log-every 1 --eval-batches 4 --threads 1";
}

}  // namespace

TEST_CASE("pretrain: every objective lowers its loss and leaves a complete loadable checkpoint", "[apps][pretrain]") {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"bert-tiny", "mlm+nsp"}, {"bert-tiny", "mlm"}, {"bert-tiny", "mlm+sbo"}, {"gpt-mini", "clm"}, {"t5-mini", "span"}};
  for (const auto& [model, objective] : runs) {
    INFO(model << " " << objective);
    const std::string out = dir / (model + "-" + objective);
    auto r = run(base_args(model, out, 25) + " --objective " + objective);
    INFO(r.out);
    REQUIRE(r.code == 0);
    auto train = metrics(out, "train");
    REQUIRE(train.size() == 25);
    CHECK(mean_loss(train, 20, 25) < mean_loss(train, 0, 5) - 0.3);
    for (const auto& line : train) {
      CHECK(line.contains("lr"));
      CHECK(line["tokens_per_sec"].get<double>() > 0);
    }
    REQUIRE(metrics(out, "valid").size() == 1);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json",
                          "trainer_state.json", "optimizer.pt"}) {
      CHECK(fs::exists(out + "/final/" + f));
    }
    auto model_loaded = models::load_pretrained(out + "/final");
    CHECK(model_loaded->model_type() == (model == "bert-tiny" ? "bert" : model == "gpt-mini" ? "gpt2" : "t5"));
    CHECK(read_file(out + "/checkpoints/latest") == "step-25\n");
    CHECK(load_json_file(out + "/config.json")["objective"] == objective);
    // lmkit-evaluate --metric objective scores the objective that trained the checkpoint's head.
    auto e = run("lmkit-evaluate --checkpoint " + out + "/final --metric objective --data " + test::sample("valid.txt") +
                 " --output " + out + "/objective.json --seq-len 64 --threads 1");
    INFO(e.out);
    REQUIRE(e.code == 0);
    CHECK(load_json_file(out + "/objective.json")["objective"] == objective);
  }
}

TEST_CASE("pretrain: a resumed run logs exactly what an uninterrupted one does", "[apps][pretrain]") {
  test::TempDir dir;
  auto once = run(base_args("bert-tiny", dir / "once", 20) + " --save-every 5");
  REQUIRE(once.code == 0);
  // Stop after step 10 (checkpointed), then resume to 20.
  auto first = run(base_args("bert-tiny", dir / "twice", 20) + " --save-every 5 --stop-at 10");
  INFO(first.out);
  REQUIRE(first.code == 0);
  CHECK_FALSE(fs::exists(dir / "twice/final"));
  // A half-written checkpoint from a killed process is never loaded.
  fs::create_directories(dir / "twice/checkpoints/.step-15.tmp.999");
  fs::create_directories(dir / "twice/checkpoints/step-15");
  { std::ofstream(dir / "twice/checkpoints/step-15/config.json") << "{"; }
  auto second = run(base_args("bert-tiny", dir / "twice", 20) + " --save-every 5 --resume");
  INFO(second.out);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Catch::Contains("resuming from") && Catch::Contains("step-10"));
  auto a = metrics(dir / "once", "train"), b = metrics(dir / "twice", "train");
  REQUIRE(a.size() == 20);
  REQUIRE(b.size() == 20);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i]["step"] == b[i]["step"]);
    CHECK(std::abs(a[i]["loss"].get<double>() - b[i]["loss"].get<double>()) <= 1e-6);
  }
  CHECK(read_file(dir / "once/final/model.safetensors") == read_file(dir / "twice/final/model.safetensors"));
}

TEST_CASE("pretrain: BigBird (random blocks drawn each step) and Longformer resume bitwise", "[apps][pretrain]") {
  test::TempDir dir;
  // Rows of 64 in blocks of 4 with 2 random blocks: block-sparse (above 36), blocks drawn every step.
  const Json big_bird = {{"model_type", "big_bird"}, {"vocab_size", 2000}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"max_position_embeddings", 128},
                         {"block_size", 4}, {"num_random_blocks", 2}};
  Json longformer = big_bird;
  longformer["model_type"] = "longformer", longformer["max_position_embeddings"] = 130;
  longformer["pad_token_id"] = 1, longformer["attention_window"] = 8;
  longformer.erase("block_size"), longformer.erase("num_random_blocks");
  for (const auto& [name, config] : {std::pair{std::string("big_bird"), big_bird}, std::pair{std::string("longformer"), longformer}}) {
    INFO(name);
    const std::string preset = dir / (name + ".json");
    { std::ofstream(preset) << config.dump(); }
    auto args = [&](const std::string& out) {
      return "lmkit-pretrain --model " + preset + " --train " + test::sample("valid.txt") + " --output " + out +
             " --objective mlm --vocab-size 2000 --steps 6 --batch-size 4 --seq-len 64 --threads 1 --seed 3";
    };
    REQUIRE(run(args(dir / (name + "-once"))).code == 0);
    REQUIRE(run(args(dir / (name + "-twice")) + " --stop-at 3").code == 0);
    REQUIRE(run(args(dir / (name + "-twice")) + " --resume").code == 0);
    CHECK(read_file(dir / (name + "-once/final/model.safetensors")) == read_file(dir / (name + "-twice/final/model.safetensors")));
  }
}

TEST_CASE("pretrain: a weighted mixture with the document mask resumes bitwise and reports each source", "[apps][pretrain][mixture]") {
  test::TempDir dir;
  const std::string small = dir / "small.txt";  // a second source: the sample's first ~8 KB
  {
    std::ifstream in(test::sample("valid.txt"));
    std::string text(8000, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    std::ofstream(small) << text.substr(0, text.rfind('\n') + 1);
  }
  const Json gpt = {{"model_type", "gpt2"}, {"vocab_size", 2000}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 2},
                    {"n_positions", 64}};
  const std::string preset = dir / "gpt.json";
  { std::ofstream(preset) << gpt.dump(); }
  auto args = [&](const std::string& out) {
    return "lmkit-pretrain --model " + preset + " --train wiki=0.75:" + test::sample("valid.txt") + ",small=0.25:" + small +
           " --valid wiki:" + test::sample("valid.txt") + ",small:" + small + " --output " + out +
           " --document-mask --vocab-size 2000 --steps 6 --batch-size 4 --seq-len 64 --eval-every 3 --eval-batches 2"
           " --log-every 1 --threads 1 --seed 3";
  };
  REQUIRE(run(args(dir / "once")).code == 0);
  auto first = run(args(dir / "twice") + " --stop-at 3");
  INFO(first.out);
  REQUIRE(first.code == 0);
  REQUIRE(run(args(dir / "twice") + " --resume").code == 0);
  CHECK(read_file(dir / "once/final/model.safetensors") == read_file(dir / "twice/final/model.safetensors"));
  const Json result = load_json_file(dir / "twice/result.json");
  CHECK(result["train_sources"]["wiki"]["samples"] == 18);  // 6 steps x 4 samples, 3 in 4 from wiki
  CHECK(result["train_sources"]["small"]["samples"] == 6);
  CHECK(result["train_sources"]["small"]["epochs"].get<double>() > 0);
  const auto valid = metrics(dir / "twice", "valid");
  REQUIRE(valid.size() == 2);
  for (const auto& v : valid) {
    CHECK(v["sources"]["wiki"]["loss"].get<double>() > 0);
    CHECK(v["sources"]["small"]["loss"].get<double>() > 0);
  }
  CHECK(metrics(dir / "once", "valid")[1] == metrics(dir / "twice", "valid")[1]);
  // A mixture that is not one: one error line naming the source, exit 2.
  auto bad = run("lmkit-pretrain --model " + preset + " --train wiki=2:" + test::sample("valid.txt") + ",wiki=1:" + small +
                 " --output " + (dir / "bad") + " --steps 2");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("error: --train/--valid mixture: source 'wiki' is named twice"));
}

TEST_CASE("pretrain: a checkpoint holds every generator and resumes on another device kind with one warning",
          "[apps][pretrain][generators]") {
  test::TempDir dir;
  const std::string out = dir / "run";
  auto first = run(base_args("bert-tiny", out, 6) + " --save-every 3 --stop-at 3");
  INFO(first.out);
  REQUIRE(first.code == 0);
  const std::string step = out + "/checkpoints/step-3";
  Json state = load_json_file(step + "/trainer_state.json");
  CHECK(state["generators"] == Json({{"device", "cpu"}, {"ranks", 1}}));
  // As if a GPU run had written it: the CPU run goes on, and says that it is not bitwise.
  state["generators"]["device"] = "cuda";
  save_json_file(step + "/trainer_state.json", state);
  auto second = run(base_args("bert-tiny", out, 6) + " --save-every 3 --resume");
  INFO(second.out);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Catch::Contains("warning: the checkpoint was written by a run on cuda and resumes on cpu"));
  CHECK(load_json_file(out + "/final/trainer_state.json")["generators"]["device"] == "cpu");
}

TEST_CASE("pretrain: --dtype bf16-weights trains, checkpoints float32 masters and resumes exactly", "[apps][pretrain]") {
  test::TempDir dir;
  const std::string once = dir / "once", twice = dir / "twice";
  // Short rows: a CPU without AVX-512 multiplies bf16 matrices ~18x slower than float32
  // (CI's AMD EPYC with AVX2 took 80 s for this case at 8 x 64 tokens a step).
  auto args = [](const std::string& out) {
    return test::with_flag(test::with_flag(base_args("gpt-mini", out, 8), "--seq-len", "16"), "--batch-size", "4") +
           " --objective clm --dtype bf16-weights";
  };
  auto a = run(args(once));
  INFO(a.out);
  REQUIRE(a.code == 0);
  // Said once where bf16 products are emulated (this CPU has no avx512_bf16 or AMX), never elsewhere.
  CHECK(Catch::Contains("warning: --dtype bf16-weights on a CPU without avx512_bf16 or AMX").match(a.out) ==
        !lmkit::cpu_has_bf16());
  auto train = metrics(once, "train");
  REQUIRE(train.size() == 8);
  CHECK(mean_loss(train, 6, 8) < mean_loss(train, 0, 2));
  CHECK(load_json_file(once + "/config.json")["dtype"] == "bf16-weights");
  // The checkpoint holds the float32 masters, as every other run's does.
  auto model = models::load_pretrained(once + "/final");
  for (const auto& p : model->parameters()) CHECK(p.scalar_type() == at::kFloat);
  auto first = run(args(twice) + " --save-every 4 --stop-at 4");
  REQUIRE(first.code == 0);
  auto second = run(args(twice) + " --save-every 4 --resume");
  INFO(second.out);
  REQUIRE(second.code == 0);
  CHECK(read_file(once + "/final/model.safetensors") == read_file(twice + "/final/model.safetensors"));
}

TEST_CASE("pretrain: the same command twice gives bitwise-identical losses and weights, --deterministic too", "[apps][pretrain]") {
  // What a seed fixes (docs/training.md): the same machine and thread count, two threads here, dropout on.
  test::TempDir dir;
  for (const std::string mode : {"", "deterministic"}) {
    const std::string a = dir / (mode + "a"), b = dir / (mode + "b");
    for (const std::string& out : {a, b}) {
      auto r = run(test::with_flag(base_args("bert-tiny", out, 6), "--threads", "2") + " --seed 11" +
                   (mode.empty() ? "" : " --deterministic"));
      INFO(r.out);
      REQUIRE(r.code == 0);
    }
    for (const char* split : {"train", "valid"}) {
      auto x = metrics(a, split), y = metrics(b, split);
      REQUIRE(x.size() == y.size());
      REQUIRE(!x.empty());
      for (size_t i = 0; i < x.size(); ++i) CHECK(x[i]["loss"].get<double>() == y[i]["loss"].get<double>());
    }
    CHECK(read_file(a + "/final/model.safetensors") == read_file(b + "/final/model.safetensors"));
    const auto x = archive_tensors(a + "/final/optimizer.pt"), y = archive_tensors(b + "/final/optimizer.pt");
    CHECK(x.size() > 3);
    CHECK(x == y);
  }
  CHECK(load_json_file(dir / "deterministica/config.json")["deterministic"] == "true");
}

TEST_CASE("pretrain: --resume refuses changed flags and is a no-op on a finished run", "[apps][pretrain]") {
  test::TempDir dir;
  REQUIRE(run(base_args("bert-tiny", dir / "r", 4) + " --save-every 2 --stop-at 2").code == 0);
  // A different seed, batch size or step count would silently train another run.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--seed", "8"}, {"--batch-size", "4"}, {"--seq-len", "32"}}) {
    const auto r = run(test::with_flag(base_args("bert-tiny", dir / "r", 4), flag, value) + " --resume");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("error: --resume with flags that differ from") && Catch::Contains("(was "));
  }
  const auto steps = run(base_args("bert-tiny", dir / "r", 5) + " --resume");
  CHECK(steps.code == 2);
  CHECK_THAT(steps.out, Catch::Contains("--steps \"5\" (was \"4\")"));
  // Told to, it continues; fewer steps than the checkpoint's is an error either way.
  CHECK(run(base_args("bert-tiny", dir / "r", 1) + " --resume --allow-changes").code == 2);
  REQUIRE(run(base_args("bert-tiny", dir / "r", 4) + " --resume").code == 0);
  const std::string result = read_file(dir / "r/result.json");
  const auto again = run(base_args("bert-tiny", dir / "r", 4) + " --resume");
  CHECK(again.code == 0);
  CHECK_THAT(again.out, Catch::Contains("already finished at step 4"));
  CHECK(read_file(dir / "r/result.json") == result);  // not rewritten with train_loss null
  CHECK(load_json_file(dir / "r/result.json")["train_loss"].is_number());
}

TEST_CASE("pretrain: --resume on training text changed since the run began is refused, or warned of with --allow-changes",
          "[apps][pretrain]") {
  // The cache is keyed by the file's path, size and date: the edited file was encoded anew and
  // the run resumed on other examples without a word, the loader's position applied to them.
  test::TempDir dir;
  const std::string text = read_file(test::sample("valid.txt"));
  std::ofstream(dir / "train.txt", std::ios::binary) << text;
  std::string args = base_args("bert-tiny", dir / "r", 4);
  args.replace(args.find(" --train ") + 9, test::sample("valid.txt").size(), dir / "train.txt");
  REQUIRE(run(args + " --save-every 2 --stop-at 2").code == 0);
  // Rewritten with the same text (a new date, so encoded again): the same examples, resumed.
  std::ofstream(dir / "train.txt", std::ios::binary) << text;
  auto same = run(args + " --resume --stop-at 3");
  INFO(same.out);
  REQUIRE(same.code == 0);
  CHECK_THAT(same.out, !Catch::Contains("differ"));
  // The same length, one word changed: other examples.
  std::string edited = text;
  const size_t at = edited.find(" the ");
  REQUIRE(at != std::string::npos);
  edited.replace(at, 5, " tha ");
  std::ofstream(dir / "train.txt", std::ios::binary) << edited;
  auto changed = run(args + " --resume");
  INFO(changed.out);
  CHECK(changed.code == 2);
  CHECK_THAT(changed.out, Catch::Contains("error: --resume: the training examples differ from the run's (") &&
                              Catch::Contains("checkpoints/step-3/trainer_state.json records ") &&
                              Catch::Contains("give the run's data (lmkit-pretrain's --allow-changes continues on these"));
  auto allowed = run(args + " --resume --allow-changes");
  INFO(allowed.out);
  CHECK(allowed.code == 0);
  CHECK_THAT(allowed.out, Catch::Contains("warning: resuming with changed data (--allow-changes): the training examples differ"));
}

TEST_CASE("pretrain: a second run on the same --output is refused, and a killed run's temporaries go", "[apps][pretrain]") {
  // Two writers used to interleave (the folder ended up one seed's while the other reported success).
  test::TempDir dir;
  const std::string args = base_args("bert-tiny", dir / "r", 100000) + " --save-every 1000";
  std::string pid = test::run_shell("(" + test::bin_dir() + "/" + args + " > /dev/null 2>&1 & echo $!)").out;
  pid = pid.substr(0, pid.find('\n'));
  for (int i = 0; i < 600 && !fs::exists(dir / "r/metrics.jsonl"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(dir / "r/metrics.jsonl"));
  const auto second = run(base_args("bert-tiny", dir / "r", 4) + " --seed 8");
  CHECK(second.code == 1);
  CHECK_THAT(second.out, Catch::Contains("is in use by another run (pid " + pid) &&
                             Catch::Contains("choose another --output"));
  test::run_shell("kill -9 " + pid);
  for (int i = 0; i < 100 && test::run_shell("kill -0 " + pid + " 2>/dev/null").code == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The lock dies with its process; a half-written checkpoint of the killed run is removed.
  fs::create_directories(dir / "r/checkpoints/.step-1000.tmp.999999");
  fs::create_directories(dir / "r/checkpoints/keep.tmp.x");
  const auto after = run(base_args("bert-tiny", dir / "r", 2) + " --allow-changes --resume");
  CHECK(after.code == 0);
  CHECK_FALSE(fs::exists(dir / "r/checkpoints/.step-1000.tmp.999999"));
  CHECK(fs::exists(dir / "r/checkpoints/keep.tmp.x"));
}

TEST_CASE("pretrain: a damaged optimizer.pt or trainer_state.json is one error and exit 2 on resume", "[apps][pretrain]") {
  test::TempDir dir;
  REQUIRE(run(base_args("bert-tiny", dir / "r", 4) + " --save-every 2 --stop-at 2").code == 0);
  const std::string ckpt = dir / "r/checkpoints/step-2";
  const std::string optimizer = read_file(ckpt + "/optimizer.pt"), state = read_file(ckpt + "/trainer_state.json");
  write_file_atomic(ckpt + "/optimizer.pt", optimizer.substr(0, optimizer.size() / 2));
  auto r = run(base_args("bert-tiny", dir / "r", 4) + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: ") && Catch::Contains("optimizer.pt: damaged"));
  // With changed flags allowed, a resume that fails on the checkpoint keeps the run's config.json:
  // it used to take the new flags first, and the run's own flags were then refused as changed.
  const std::string config = read_file(dir / "r/config.json");
  r = run(test::with_flag(base_args("bert-tiny", dir / "r", 4), "--lr", "2e-3") + " --resume --allow-changes");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("optimizer.pt: damaged"));
  CHECK(read_file(dir / "r/config.json") == config);
  write_file_atomic(ckpt + "/optimizer.pt", optimizer);
  write_file_atomic(ckpt + "/trainer_state.json", R"({"step": "two", "epoch": 0, "batch": 2})");
  r = run(base_args("bert-tiny", dir / "r", 4) + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("trainer_state.json: damaged"));
  write_file_atomic(ckpt + "/trainer_state.json", state);
  CHECK(run(base_args("bert-tiny", dir / "r", 4) + " --resume").code == 0);
}

TEST_CASE("pretrain: a corrupt latest is reported", "[apps][pretrain]") {
  test::TempDir dir;
  REQUIRE(run(base_args("bert-tiny", dir / "r", 4)).code == 0);
  write_file_atomic(dir / "r/checkpoints/latest", "garbage\n");
  auto r = run(base_args("bert-tiny", dir / "r", 8) + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: ") && Catch::Contains("latest: corrupt"));
  write_file_atomic(dir / "r/checkpoints/latest", "step-99\n");
  r = run(base_args("bert-tiny", dir / "r", 8) + " --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("names step-99, which is missing or incomplete"));
}

TEST_CASE("pretrain: a full disk while writing a checkpoint is one error, exit 1, nothing left behind", "[apps][pretrain]") {
  // A file-size limit between the model's size and the optimizer state's (twice the model):
  // model.safetensors is written, optimizer.pt is not. It used to end in std::terminate
  // (exit 134) with the checkpoint's temporary folder left behind.
  test::TempDir dir;
  REQUIRE(run(base_args("bert-tiny", dir / "ok", 1)).code == 0);
  const auto model_bytes = fs::file_size(dir / "ok/final/model.safetensors");
  REQUIRE(fs::file_size(dir / "ok/final/optimizer.pt") > 3 * model_bytes / 2);
  const std::string limited = "bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(model_bytes * 5 / 4 / 1024) +
                              "; exec " + test::bin_dir() + "/" + base_args("bert-tiny", dir / "full", 2) + " 2>&1\"";
  const test::Run r = test::run_shell(limited);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("error: ") && Catch::Contains("optimizer.pt") && Catch::Contains("File too large"));
  CHECK_THAT(r.out, !Catch::Contains("terminate"));
  for (const auto& e : fs::recursive_directory_iterator(dir / "full")) {
    CHECK_THAT(e.path().string(), !Catch::Contains(".tmp."));
  }
  CHECK_FALSE(fs::exists(dir / "full/checkpoints/step-2"));
}

TEST_CASE("pretrain: bad input is one error line and exit 2", "[apps][pretrain]") {
  test::TempDir dir;
  { std::ofstream(dir / "empty.txt") << "\n\n"; }
  { std::ofstream(dir / "run.json") << R"({"steps": 3, "batch-sise": 4})"; }
  { std::ofstream(dir / "docs.jsonl") << R"({"content": "A document .", "id": 1})" << "\n"; }
  {
    std::ofstream(dir / "short.json") << R"({"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64})";
  }
  const std::string tok_run = dir / "tok";
  REQUIRE(run(base_args("bert-tiny", tok_run, 2)).code == 0);
  const std::string bert_tok = tok_run + "/tokenizer.model";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "none.txt") + " --output " + (dir / "o1"),
       "none.txt: no such text file or corpus directory"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "tok/final") + " --output " +
           (dir / "o9") + " --tokenizer " + bert_tok,
       "final: a model checkpoint directory, not text or a token corpus (no header.json)"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train '" + (dir / "shards-*.jsonl.gz") + "' --output " +
           (dir / "o12") + " --tokenizer " + bert_tok,
       "shards-*.jsonl.gz': the pattern matches no file"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "empty.txt") + " --output " + (dir / "o2") +
           " --tokenizer " + bert_tok,
       "empty corpus"},
      // A --text-field that no input has is refused, not ignored; one a JSONL line lacks names the line.
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --output " +
           (dir / "o13") + " --tokenizer " + bert_tok + " --text-field content",
       "--text-field content: no text input has fields to name (JSONL or Parquet): " + test::sample("valid.txt") +
           " is read as plain text"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "docs.jsonl") + " --output " +
           (dir / "o14") + " --tokenizer " + bert_tok + " --text-field body",
       "docs.jsonl:1: no field 'body' (--text-field names the field of texts)"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "docs.jsonl") + " --output " +
           (dir / "o15") + " --text-field ''",
       "--text-field: a name, not empty"},
      {"lmkit-pretrain --model " + test::model_preset("gpt-mini") + " --train " + test::sample("valid.txt") + " --output " + (dir / "o3") +
           " --objective mlm",
       "objective 'mlm' does not apply to model_type 'gpt2'"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --output " + (dir / "o4") +
           " --tokenizer " + bert_tok + " --seq-len 1024",
       "--seq-len 1024 exceeds the model's max_position_embeddings (512)"},
      {"lmkit-pretrain --model " + (dir / "short.json") + " --train " + test::sample("valid.txt") + " --output " + (dir / "o8") +
           " --tokenizer " + bert_tok,
       "--seq-len 128 (its default) exceeds the model's max_position_embeddings (64)"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + tok_run + "/cache/" +
           fs::directory_iterator(tok_run + "/cache")->path().filename().string() + " --output " + (dir / "o5") +
           " --tokenizer " + (dir / "other/tokenizer.model"),
       "different tokenizer"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --output " + (dir / "o6") +
           " --objective sop",
       "objective 'sop' does not apply"},
      {"lmkit-pretrain --config " + (dir / "run.json") + " --model " + test::model_preset("bert-tiny") + " --train " +
           test::sample("valid.txt") + " --output " + (dir / "o7"),
       "run.json: unknown key 'batch-sise' (did you mean 'batch-size'?)"},
      // A FIFO was "no such text file" (it is there); one as --valid was found after --train's encoding.
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + (dir / "fifo") + " --output " + (dir / "o10"),
       "fifo: not a regular file (a device, FIFO or socket)"},
      {"lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --valid " +
           (dir / "fifo") + " --output " + (dir / "o11") + " --tokenizer " + bert_tok,
       "fifo: not a regular file (a device, FIFO or socket)"},
  };
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  // A second BERT tokenizer, for the corpus/tokenizer mismatch.
  REQUIRE(run("lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") + " --output " +
              (dir / "other") + " --vocab-size 1500 --steps 1 --batch-size 2 --seq-len 16 --threads 1")
              .code == 0);
  for (const auto& [cmd, message] : cases) {
    INFO(cmd);
    auto r = run(cmd);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("error: " ) && Catch::Contains(message));
    if (message.rfind("fifo", 0) == 0) CHECK_THAT(r.out, !Catch::Contains("encode "));  // before any text is encoded
  }
}

TEST_CASE("pretrain: the Transformer learns seq2seq from parallel files and evaluate scores BLEU", "[apps][pretrain]") {
  test::TempDir dir;
  // A copy task on real sentences: PREFIX.src and PREFIX.tgt hold the same lines.
  int n = 0;
  {
    std::ifstream in(test::sample("valid.txt"));
    std::ofstream src(dir / "pairs.src"), tgt(dir / "pairs.tgt");
    std::string line;
    while (std::getline(in, line) && n < 300) {
      if (line.size() < 20) continue;
      const std::string s = line.substr(0, line.find(' ', 60) == std::string::npos ? line.size() : line.find(' ', 60));
      src << s << "\n";
      tgt << s << "\n";
      ++n;
    }
  }
  const std::string out = dir / "s2s";
  auto r = run("lmkit-pretrain --model " + test::model_preset("transformer-small") + " --train " + (dir / "pairs") + " --valid " +
               (dir / "pairs") + " --source-lang src --target-lang tgt --output " + out +
               " --vocab-size 1000 --steps 25 --batch-size 16 --seq-len 48 --lr 1e-3 --warmup 3 --log-every 1 --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto train = metrics(out, "train");
  REQUIRE(train.size() == 25);
  CHECK(mean_loss(train, 20, 25) < mean_loss(train, 0, 5) - 0.3);
  CHECK(models::load_pretrained(out + "/final")->architecture() == "TransformerForSeq2Seq");
  auto bleu = run("lmkit-evaluate --checkpoint " + out + "/final --data " + (dir / "pairs.src") + " --references " +
                  (dir / "pairs.tgt") + " --metric bleu --beams 2 --max-new-tokens 8 --output " + (dir / "bleu.json") +
                  " --threads 1");
  INFO(bleu.out);
  REQUIRE(bleu.code == 0);
  const Json b = load_json_file(dir / "bleu.json");
  CHECK(b["sentences"] == n);
  CHECK(b["bleu"].get<double>() >= 0.0);
  // Missing language flags are an input error.
  auto bad = run("lmkit-pretrain --model " + test::model_preset("transformer-small") + " --train " + (dir / "pairs") + " --output " +
                 (dir / "bad"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--source-lang and --target-lang"));
}

TEST_CASE("pretrain: each registered optimizer trains, resumes bitwise, and its flags are checked", "[apps][pretrain][optimizer]") {
  test::TempDir dir;
  auto args = [&](const std::string& out, const std::string& optimizer) {
    return "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") +
           " --output " + out + " --objective mlm --vocab-size 2000 --steps 6 --batch-size 4 --seq-len 32 --threads 1" +
           " --seed 5 --optimizer " + optimizer;
  };
  for (const std::string optimizer : {"adafactor", "lamb", "muon"}) {
    INFO(optimizer);
    const std::string once = dir / (optimizer + "-once"), twice = dir / (optimizer + "-twice");
    auto first = run(args(once, optimizer));
    INFO(first.out);
    REQUIRE(first.code == 0);
    CHECK(load_json_file(once + "/config.json")["optimizer"] == optimizer);
    REQUIRE(run(args(twice, optimizer) + " --stop-at 3").code == 0);
    // The run's optimizer is part of it: another one on --resume is refused by name, --allow-changes or not.
    const std::string other = optimizer == "lamb" ? "muon" : "lamb";
    for (const std::string allow : {"", " --allow-changes"}) {
      auto changed = run(args(twice, other) + " --resume" + allow);
      CHECK(changed.code == 2);
      CHECK_THAT(changed.out, Catch::Contains("error: --resume with --optimizer " + other + ": the run trains with --optimizer " +
                                              optimizer) &&
                                  Catch::Contains("from its weights, " + twice + "/checkpoints/step-3 (lmkit-pretrain --init"));
    }
    CHECK(load_json_file(twice + "/config.json")["optimizer"] == optimizer);
    REQUIRE(run(args(twice, optimizer) + " --resume").code == 0);
    CHECK(read_file(once + "/final/model.safetensors") == read_file(twice + "/final/model.safetensors"));
  }
  const std::string bad = dir / "bad";
  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {"adamw", " --adafactor-decay-rate -0.5", "--adafactor-decay-rate applies to --optimizer adafactor, not adamw"},
      {"adafactor", " --adam-beta2 0.95", "--adam-beta2 applies to --optimizer adamw, lamb or muon, not adafactor"},
      {"muon", " --muon-adjust-lr fast", "--muon-adjust-lr 'fast': expected match_rms_adamw or original"},
      {"adafactor", " --adafactor-clip-threshold one", "--adafactor-clip-threshold 'one': expected a number"},
      {"adafactor", " --adafactor-warmup-init true", "--adafactor-warmup-init needs --adafactor-relative-step true"},
      {"sgd", "", "unknown optimizer 'sgd' (expected adamw, adafactor, lamb or muon)"}};
  for (const auto& [optimizer, flags, message] : refused) {
    auto r = run(args(bad, optimizer) + flags);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("error: " + message));
  }
  CHECK_FALSE(fs::exists(bad + "/checkpoints"));
}
