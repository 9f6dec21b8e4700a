#include "lmkit/tasks/task.h"

#include <algorithm>
#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/models/family.h"
#include "lmkit/tasks/builtin.h"
#include "lmkit/tasks/metric.h"

namespace lmkit::tasks {

namespace {

std::vector<TaskSpec>& registry() {
  static std::vector<TaskSpec> all = [] {
    std::vector<TaskSpec> builtin = {classification_task(), token_classification_task(), text_to_text_task(), question_answering_task(),
                                          image_classification_task()};
    for (auto& t : builtin) t.source = "lmkit";
    return builtin;
  }();
  return all;
}

const TaskSpec* find(const std::string& name) {
  for (const auto& t : registry()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

const std::vector<TaskSpec>& tasks() { return registry(); }

void register_task(TaskSpec spec) {
  check_input(!spec.name.empty() && !spec.head.empty() && !spec.metric.empty() && spec.create != nullptr,
              registering_source() + ": a task needs a name, a head, a metric and create");
  if (const TaskSpec* known = find(spec.name)) {
    throw InputError("task '" + spec.name + "' is registered twice: by " + known->source + " and by " + registering_source());
  }
  for (const auto& m : metrics()) {  // lmkit-evaluate's own and those registered
    if (m.task.empty() && m.name == spec.metric) {
      throw InputError("metric '" + spec.metric + "' is registered twice: by " + m.source + " and by " + registering_source() +
                       " (task " + spec.name + ")");
    }
  }
  if (const TaskSpec* known = task_with_metric(spec.metric)) {
    throw InputError("metric '" + spec.metric + "' is registered twice: by " + known->source + " (task " + known->name +
                     ") and by " + registering_source());
  }
  spec.source = registering_source();
  registry().push_back(std::move(spec));
}

const TaskSpec& task(const std::string& name) {
  if (const TaskSpec* t = find(name)) return *t;
  throw InputError("unknown task '" + name + "' (expected " + task_names() + ")");
}

const TaskSpec* task_with_metric(const std::string& metric) {
  for (const auto& t : registry()) {
    if (t.metric == metric) return &t;
  }
  return nullptr;
}

std::string task_names() {
  std::vector<std::string> names;
  for (const auto& t : registry()) names.push_back(t.name);
  return join_names(names, " or ");
}

int64_t Context::length_within_positions(int64_t fallback) const {
  const int64_t length = max_length > 0 ? max_length : fallback;
  const int64_t positions = family.max_length(model_config);
  return positions > 0 ? std::min(length, positions) : length;
}

std::string head_of(const TaskSpec& spec, const models::Family& family) { return family.head_or_error(spec.head); }

void save_info(const std::string& dir, const std::string& task, int64_t max_length, const Json& info) {
  Json j = {{"task", task}, {"max_length", max_length}};
  for (auto it = info.begin(); it != info.end(); ++it) j[it.key()] = it.value();
  save_json_file(dir + "/finetune.json", j);
}

Json read_info(const std::string& dir, const std::string& task) {
  const std::string file = dir + "/finetune.json";
  if (!std::filesystem::exists(file)) return Json::object();
  const Json j = load_json_file(file);
  check_input(j.is_object(), file + ": must be a JSON object");
  check_input(!j.contains("max_length") || (j["max_length"].is_number_integer() && j["max_length"].get<int64_t>() >= 4),
              file + ": 'max_length' must be an integer >= 4");
  // Checkpoints from before the registry have no "task": a classifier's.
  const std::string written = j.contains("task") && j["task"].is_string() ? j["task"].get<std::string>() : "classification";
  check_input(written == task, file + ": the checkpoint was finetuned for --task " + written + ", not " + task);
  return j;
}

Task& TaskFlags::of(const std::string& name) {
  const auto& all = tasks();
  for (size_t i = 0; i < all.size() && i < instances.size(); ++i) {
    if (all[i].name == name) return *instances[i];
  }
  throw InputError("unknown task '" + name + "' (expected " + task_names() + ")");
}

void TaskFlags::check_given(const CLI::App& app, const std::string& chosen, const std::vector<std::string>& allowed) const {
  const auto& all = tasks();
  for (size_t i = 0; i < flags.size(); ++i) {
    if (all[i].name == chosen) continue;
    for (const auto& flag : flags[i]) {
      if (!app.count(flag) || std::find(allowed.begin(), allowed.end(), flag) != allowed.end()) continue;
      throw InputError(flag + " applies to " + (mode == Mode::kFinetune ? "--task " + all[i].name : "--metric " + all[i].metric));
    }
  }
}

namespace {

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) names.push_back(o->get_name());
  return names;
}

}  // namespace

TaskFlags add_task_flags(CLI::App& app, Mode mode) {
  TaskFlags out;
  out.mode = mode;
  for (const auto& spec : tasks()) {
    const auto before = option_names(app);
    out.instances.push_back(call_registered(spec.source, "task '" + spec.name + "': create", spec.create));
    if (!out.instances.back()) throw RuntimeError(spec.source + ": task '" + spec.name + "': create returned no task");
    try {
      out.instances.back()->add_flags(app, mode);
    } catch (const CLI::OptionAlreadyAdded& e) {
      throw InputError("task '" + spec.name + "' (" + spec.source + ") adds a flag the app has already: " + e.what());
    }
    std::vector<std::string> added;
    for (const auto& name : option_names(app)) {
      if (std::find(before.begin(), before.end(), name) == before.end()) added.push_back(name);
    }
    out.flags.push_back(std::move(added));
  }
  return out;
}

}  // namespace lmkit::tasks
