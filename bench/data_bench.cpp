// lmkit-bench data: examples/s and tokens/s of each objective through the
// loader (one thread, no prefetch: the raw rate of producing batches), against
// the training throughput of bert-mini measured in the same run.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "bench.h"
#include "lmkit/core/app.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/step.h"

namespace fs = std::filesystem;

namespace lmkit::bench {

namespace {

struct DataArgs {
  RuntimeOptions runtime;
  std::string text = "data/wikitext-2-sample/train.txt", reference = "models/bert-mini.json";
  int64_t batch = 32, seq = 128, batches = 100, vocab = 8000;
};

double train_tokens_per_sec(const DataArgs& a) {
  Json config = load_json_file(a.reference);
  config["vocab_size"] = a.vocab;
  auto model = models::create_model(config, a.reference, "BertForPreTraining");
  model->train();
  auto optimizer = train::make_adamw(*model, {});
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) {
    Batch b;
    b.input_ids = at::randint(5, a.vocab, {a.batch, a.seq}, at::kLong);
    b.attention_mask = at::ones_like(b.input_ids);
    b.token_type_ids = at::zeros_like(b.input_ids);
    b.labels = at::where(at::rand({a.batch, a.seq}).lt(0.15), b.input_ids, at::full_like(b.input_ids, -100));
    b.extra["next_sentence_label"] = at::randint(0, 2, {a.batch}, at::kLong);
    const auto t0 = std::chrono::steady_clock::now();
    train::train_step(*model, *optimizer, {b}, 1.0, false);
    if (i >= 2) ms.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(a.batch * a.seq) / median(ms);
}

void run_data(const DataArgs& a) {
  init_runtime(a.runtime);
  const fs::path dir = fs::temp_directory_path() / ("lmkit-bench-data-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const double reference = train_tokens_per_sec(a);
  std::printf("reference: bert-mini training step (B=%lld, T=%lld, vocab %lld): %.0f tokens/s\n",
              static_cast<long long>(a.batch), static_cast<long long>(a.seq), static_cast<long long>(a.vocab), reference);
  std::printf("%-8s %12s %12s %10s\n", "objective", "examples/s", "tokens/s", "x training");
  double slowest = 1e30;
  for (const auto& objective : data::objectives()) {
    const std::string& name = objective.name;
    const auto trained_by = models::families_with(name);
    if (objective.parallel_text || trained_by.empty()) continue;  // corpus objectives some family trains
    // The tokenizer of the first model family that trains the objective.
    const std::string family = trained_by.front()->tokenizer_family;
    const std::string base = (dir / family).string();
    if (!fs::exists(base + ".model")) {
      tokenizer::TrainOptions t;
      t.inputs = {a.text}, t.vocab_size = a.vocab, t.family = family, t.output = base + ".model";
      tokenizer::Tokenizer::train(t);
      data::encode_corpus(tokenizer::Tokenizer::load(base + ".model"), {{a.text}, data::TextFormat::kAuto, "text", base, 0});
    }
    const auto tok = tokenizer::Tokenizer::load(base + ".model");
    auto corpus = std::make_shared<const data::Corpus>(base);
    data::ObjectiveInputs in;
    in.corpus = corpus, in.tokenizer = &tok, in.seq_len = a.seq, in.seed = 1;
    auto ds = objective.dataset(in);
    data::LoaderOptions lo;
    lo.batch_size = a.batch, lo.pad_id = data::pad_id(tok), lo.prefetch = 0;
    data::Loader loader(ds, lo);
    int64_t tokens = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < a.batches; ++i) tokens += loader.next().num_tokens();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = static_cast<double>(tokens) / s;
    slowest = std::min(slowest, tps / reference);
    std::printf("%-8s %12.0f %12.0f %9.0fx\n", name.c_str(), static_cast<double>(a.batches * a.batch) / s, tps, tps / reference);
  }
  std::printf("slowest objective: %.0fx the training throughput (target >= 20x)\n", slowest);
}

}  // namespace

void add_data_command(CLI::App& app) {
  auto a = std::make_shared<DataArgs>();
  CLI::App* cmd = app.add_subcommand("data", "objective throughput through the loader vs bert-mini training");
  cmd->add_option("--text", a->text, "text to train tokenizers on and encode");
  cmd->add_option("--reference", a->reference, "model preset whose training throughput is the reference");
  cmd->add_option("--batch-size", a->batch, "batch size")->check(positive());
  cmd->add_option("--seq-len", a->seq, "sequence length")->check(positive());
  cmd->add_option("--batches", a->batches, "batches timed per objective")->check(positive());
  cmd->add_option("--vocab-size", a->vocab, "tokenizer vocabulary")->check(positive());
  add_runtime_flags(*cmd, a->runtime);
  cmd->callback([a] { run_data(*a); });
}

}  // namespace lmkit::bench
