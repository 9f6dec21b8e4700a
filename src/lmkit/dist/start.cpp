#include "lmkit/dist/start.h"

#include <cstdio>

#include "lmkit/core/app.h"

namespace lmkit::dist {

void add_distributed_flags(CLI::App& app, GroupOptions& options) {
  app.add_option("--backend", options.backend, "distributed backend under torchrun/SLURM/MPI: auto (nccl on CUDA, gloo on CPU), gloo, nccl")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
  app.add_option("--dist-timeout", options.timeout_s,
                 "seconds a rank waits for the others (rendezvous, collectives) before failing")
      ->check(in_range(1, 86400));
}

void quiet_follower_input_errors() {
  try {
    const Launch launch = read_launch();
    if (launch.active && launch.rank > 0 && launch.one_node) set_follower_quiet(true);
  } catch (const Error&) {
  }
}

Started start(RuntimeOptions runtime, const GroupOptions& options) {
  const Launch launch = read_launch();
  runtime.device = device_for_rank(runtime.device, launch);
  const c10::Device device = init_runtime(runtime);
  auto group = Group::create(launch, device, options);
  if (group && group->leader()) {
    std::fprintf(stderr, "distributed: %lld processes (%s), backend %s, rendezvous %s:%d\n",
                 static_cast<long long>(group->size()), launch.source.c_str(), group->backend().c_str(),
                 launch.master_addr.c_str(), launch.master_port);
  }
  return {device, std::move(group)};
}

}  // namespace lmkit::dist
