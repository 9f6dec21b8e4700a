#include "lmkit/train/run.h"

#include "lmkit/dist/group.h"
#include "lmkit/train/trainer.h"

namespace lmkit::train {

Run open_run(const RuntimeOptions& runtime, const dist::GroupOptions& dist, const std::string& output, bool resume,
             bool overwrite, const std::vector<std::string>& also_ours) {
  Run r{dist::start(runtime, dist), true, nullptr, output, resume};
  r.leader = !r.started.group || r.started.group->leader();
  // One writer per run directory (rank 0 in a data-parallel job).
  if (r.leader) r.lock = open_run_directory(output, resume, overwrite, also_ours);
  else make_output_directory(output);
  return r;
}

void Run::record_config(const Json& run_config, int64_t steps, bool allow_changes) const {
  if (resume) check_resumed_flags(output, run_config, steps, allow_changes);
  if (leader) save_json_file(output + "/config.json", run_config);
}

}  // namespace lmkit::train
