// What lmkit-pretrain and lmkit-finetune do first in a launched job: their
// --backend / --dist-timeout flags, the rank's device, and the process group.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "lmkit/core/runtime.h"
#include "lmkit/dist/group.h"

namespace lmkit::dist {

void add_distributed_flags(CLI::App& app, GroupOptions& options);

/// In a job on one node (Launch::one_node), ranks other than 0 leave their input errors until
/// training starts to rank 0 (set_follower_quiet: the same command line, environment and files
/// give rank 0 the same error). Called first in the training apps' main(); a launch environment
/// it cannot read changes nothing (dist::start says what is wrong with it).
void quiet_follower_input_errors();

struct Started {
  c10::Device device;
  std::shared_ptr<Group> group;  ///< nullptr when no launcher set RANK/WORLD_SIZE (or SLURM's, Open MPI's)
};

/// Reads the launch environment, puts `--device cuda` on LOCAL_RANK's GPU,
/// initialises the runtime (init_runtime) and joins the process group.
Started start(RuntimeOptions runtime, const GroupOptions& options);

}  // namespace lmkit::dist
