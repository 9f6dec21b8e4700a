// What every training app does before its first step, in one place: join the process
// group, open the run directory (continued with --resume, replaced with --overwrite,
// one writer per directory), and record the run's flags in OUTPUT/config.json, checked
// against the run's own on --resume.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/dist/start.h"

namespace lmkit::train {

/// An opened run directory and the process that trains in it.
struct Run {
  dist::Started started;
  bool leader = true;             ///< writes the run directory (rank 0 of a data-parallel job)
  std::unique_ptr<RunLock> lock;  ///< held by the leader for the run's life
  std::string output;
  bool resume = false;

  dist::Group* group() const { return started.group.get(); }
  /// Checks and records the run's flags (the leader): with --resume, refuses a flag that changed
  /// (check_resumed_flags: `steps`, `allow_changes`). Returns the write of OUTPUT/config.json
  /// for TrainerInputs::on_restored: made once the checkpoint has loaded, so that a resume that
  /// fails on it keeps the config.json the checkpoints belong to.
  std::function<void()> record_config(const Json& run_config, int64_t steps, bool allow_changes) const;
};

/// Starts the runtime and the process group (dist::start) and opens `output` for the run:
/// a used directory is continued (`resume`) or replaced (`overwrite`), never mixed with a new run.
/// `also_ours`: the files the app writes there beyond the trainer's (open_run_directory).
Run open_run(const RuntimeOptions& runtime, const dist::GroupOptions& dist, const std::string& output, bool resume,
             bool overwrite, const std::vector<std::string>& also_ours = {});

}  // namespace lmkit::train
