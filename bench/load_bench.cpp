// lmkit-bench load: the time to load a checkpoint directory as the apps do (load_pretrained:
// the model built without its random initialisation, every weight read from the file)
// against building it with the initialisation drawn first (the draw load_pretrained made before
// 2026-11-29) and then reading the same file through the same reader, and the speed-up. The
// same tensors either way.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

#include "bench.h"
#include "lmkit/core/app.h"
#include "lmkit/core/config.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/model.h"
#include "lmkit/models/registry.h"

namespace lmkit::bench {

namespace {

struct LoadArgs {
  RuntimeOptions runtime;
  std::string checkpoint;
  int64_t rounds = 3;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_load(const LoadArgs& a) {
  init_runtime(a.runtime);
  std::vector<double> skipped, drawn;
  bool same = true;
  int64_t parameters = 0;
  for (int64_t round = 0; round < a.rounds; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    auto loaded = models::load_pretrained(a.checkpoint);
    skipped.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    const std::string config = a.checkpoint + "/config.json", weights = a.checkpoint + "/model.safetensors";
    auto built = models::create_model(load_json_file(config), config);
    models::load_hf_weights(*built, io::read_safetensors(weights), weights, /*strict=*/true);
    drawn.push_back(seconds_since(t0));
    parameters = models::count_parameters(*loaded);
    const auto x = loaded->named_parameters(), y = built->named_parameters();
    for (size_t i = 0; i < x.size(); ++i) same = same && at::equal(x[i].value(), y[i].value());
  }
  const double fast = median(skipped), slow = median(drawn);
  std::printf("checkpoint             %s (%lld parameters), threads %d, median of %lld\n", a.checkpoint.c_str(),
              static_cast<long long>(parameters), at::get_num_threads(), static_cast<long long>(a.rounds));
  std::printf("load_pretrained        %.2f s (the weights' random draw skipped)\n", fast);
  std::printf("drawn, then read       %.2f s (the initialisation drawn first, then the file)\n", slow);
  std::printf("same tensors           %s\n", same ? "yes" : "NO");
  std::printf("speed-up               %.2fx\n", slow / fast);
  std::printf("load_seconds %.3f\n", fast);
}

}  // namespace

void add_load_command(CLI::App& app) {
  auto a = std::make_shared<LoadArgs>();
  CLI::App* cmd = app.add_subcommand("load", "loading a checkpoint directory with vs without the random initialisation first");
  cmd->add_option("--checkpoint", a->checkpoint, "checkpoint directory (config.json + model.safetensors)")->required();
  cmd->add_option("--rounds", a->rounds, "loads of each kind; the median is reported")->check(positive());
  add_runtime_flags(*cmd, a->runtime);
  cmd->callback([a] { run_load(*a); });
}

}  // namespace lmkit::bench
