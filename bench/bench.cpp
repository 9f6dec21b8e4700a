// lmkit-bench: throughput benchmarks. Every subcommand prints its figure, the
// reference it is compared against, and the ratio; none is a pass/fail test.
#include "bench.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "lmkit/core/app.h"
#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"

namespace lmkit::bench {

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

void profile_to(const std::string& path, bool cuda, const std::function<void()>& work) {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  work();
  torch::autograd::profiler::disableProfiler()->save(path);
  // The profiler reports a failed write only in its log.
  if (!std::filesystem::is_regular_file(path)) throw RuntimeError(path + ": the trace could not be written");
}

}  // namespace lmkit::bench

int main(int argc, char** argv) {
#ifdef LMKIT_BENCH_BUILD
  // The test command builds at -O1 (scripts/test.sh): its figures are not the ones to quote.
  if (std::strcmp(LMKIT_BENCH_BUILD, "-O3") != 0)
    std::fprintf(stderr, "warning: this lmkit-bench is a %s build; docs/benchmarks.md's figures come from "
                 "scripts/build.sh's -O3 Release build\n", LMKIT_BENCH_BUILD);
#endif
  // --plugin (and $LMKIT_PLUGINS): a plugin's families and objectives benchmark as lmkit's do.
  if (const int rc = lmkit::load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-bench: throughput benchmarks for lmkit");
  app.require_subcommand(1);
  lmkit::bench::add_layer_command(app);
  lmkit::bench::add_train_command(app);
  lmkit::bench::add_data_command(app);
  lmkit::bench::add_generate_command(app);
  lmkit::bench::add_load_command(app);
  return lmkit::run_app(app, argc, argv, [] {});
}
