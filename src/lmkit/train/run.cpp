#include "lmkit/train/run.h"

#include <filesystem>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/dist/group.h"
#include "lmkit/train/trainer.h"

namespace lmkit::train {

namespace {

// A run trained with plugins (its config.json records each --plugin) is resumed with them:
// without one, its objective or family would be unknown, and the error would not say why.
void check_run_plugins(const std::string& output) {
  const std::string path = output + "/config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const Json config = load_json_file(path);
  if (!config.is_object() || !config.contains("plugin")) return;
  const Json& recorded = config["plugin"];  // one path, or a list of them
  for (const auto& plugin : recorded.is_array() ? recorded : Json::array({recorded})) {
    if (!plugin.is_string()) continue;
    const std::string file = plugin.get<std::string>();
    check_input(plugin_loaded(file), path + " records --plugin " + file + ": the run was trained with it; pass it again to " +
                                         "resume (or name it in $LMKIT_PLUGINS)");
  }
}

}  // namespace

Run open_run(const RuntimeOptions& runtime, const dist::GroupOptions& dist, const std::string& output, bool resume,
             bool overwrite, const std::vector<std::string>& also_ours) {
  if (resume) check_run_plugins(output);
  Run r{dist::start(runtime, dist), true, nullptr, output, resume};
  r.leader = !r.started.group || r.started.group->leader();
  // One writer per run directory (rank 0 in a data-parallel job): the other ranks make nothing
  // there (they read what rank 0 wrote, after it: the tokenizer, the corpus cache), and stop
  // with rank 0 when it refuses the directory.
  dist::leader_only(r.group(), [&] { r.lock = open_run_directory(output, resume, overwrite, also_ours); });
  return r;
}

std::function<void()> Run::record_config(const Json& run_config, int64_t steps, bool allow_changes) const {
  dist::leader_only(group(), [&] {
    if (resume) check_resumed_flags(output, run_config, steps, allow_changes);
  });
  return [path = output + "/config.json", run_config] { save_json_file(path, run_config); };
}

}  // namespace lmkit::train
