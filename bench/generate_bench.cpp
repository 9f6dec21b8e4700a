// lmkit-bench generate: greedy generation with the KV cache against re-running
// the whole sequence at every step (the same tokens), and the speed-up.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

#include "bench.h"
#include "lmkit/core/app.h"
#include "lmkit/core/file.h"
#include "lmkit/eval/generation.h"
#include "lmkit/models/registry.h"

namespace lmkit::bench {

namespace {

struct GenerateArgs {
  RuntimeOptions runtime;
  std::string model = "models/gpt-mini.json";
  int64_t new_tokens = 256, prompt = 16, batch = 1, vocab = 8000;
  std::string profile;  // a Chrome trace of one more generation with the cache
  bool overwrite = false, cache_only = false;
};

void run_generate(const GenerateArgs& a) {
  const c10::Device device = init_runtime(a.runtime);
  if (!a.profile.empty()) check_output_file(a.profile, a.overwrite, "--profile");
  Json config = load_json_file(a.model);
  config["vocab_size"] = a.vocab;
  auto model = models::create_model(config, a.model);
  model->to(device);
  const auto spec = model->generation_spec();
  at::Tensor prompt = at::randint(5, a.vocab, {a.batch, a.prompt}, at::kLong).to(device);
  eval::GenerationOptions o;
  o.max_new_tokens = a.new_tokens;
  o.stop_at_eos = false;
  auto time = [&](bool cache) {
    o.use_cache = cache;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = eval::generate(*model, prompt, spec.encoder_decoder ? at::ones_like(prompt) : at::Tensor(), o);
    return std::make_pair(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out);
  };
  time(true);  // warm-up
  auto [cached_s, cached] = time(true);
  std::printf("model                  %s, prompt %lld, %lld new tokens, batch %lld, threads %d\n", a.model.c_str(),
              static_cast<long long>(a.prompt), static_cast<long long>(a.new_tokens), static_cast<long long>(a.batch),
              at::get_num_threads());
  std::printf("with KV cache          %.2f s  (%.0f tokens/s)\n", cached_s, a.new_tokens * a.batch / cached_s);
  if (!a.cache_only) {
    auto [full_s, full] = time(false);
    std::printf("without (full re-run)  %.2f s  (%.0f tokens/s)\n", full_s, a.new_tokens * a.batch / full_s);
    std::printf("same tokens            %s\n", cached == full ? "yes" : "NO");
    std::printf("speed-up               %.1fx (target >= 5x at 256 new tokens)\n", full_s / cached_s);
  }
  std::printf("tokens_per_sec %.0f\n", a.new_tokens * a.batch / cached_s);
  if (!a.profile.empty()) {
    profile_to(a.profile, device.is_cuda(), [&] { time(true); });  // its tokens come back to the host
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "greedy generation with vs without the KV cache");
  cmd->add_option("--model", a->model, "model preset JSON (GPT, T5 or Transformer)");
  cmd->add_option("--new-tokens", a->new_tokens, "tokens to generate")->check(positive());
  cmd->add_option("--prompt-len", a->prompt, "prompt tokens")->check(positive());
  cmd->add_option("--batch-size", a->batch, "prompts at once")->check(positive());
  cmd->add_option("--vocab-size", a->vocab, "vocabulary")->check(positive());
  cmd->add_option("--profile", a->profile,
                  "write a Chrome trace of one more generation with the cache (bench/trace_summary.py sums it)");
  cmd->add_flag("--overwrite", a->overwrite, "replace the --profile file if it exists");
  cmd->add_flag("--cache-only", a->cache_only, "time the generation with the KV cache alone, not the full re-run too");
  add_runtime_flags(*cmd, a->runtime);
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace lmkit::bench
