#include "lmkit/tasks/metric.h"

#include <algorithm>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tasks/builtin.h"
#include "lmkit/tasks/task.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tasks {

namespace {

// lmkit's own metrics, and those programs and plugins register (a task's metric comes from
// the task registry).
const std::vector<MetricSpec>& own() {
  static const std::vector<MetricSpec> all = [] {
    std::vector<MetricSpec> builtin = builtin_metrics();
    for (auto& m : builtin) m.source = "lmkit";
    return builtin;
  }();
  return all;
}
std::vector<MetricSpec>& registered() {
  static std::vector<MetricSpec> all;
  return all;
}

// A finetuning task's metric: the task reads the data as the checkpoint's finetune.json
// records, the flags given over it.
MetricSpec task_metric(const TaskSpec& t) {
  MetricSpec m;
  m.name = t.metric;
  m.summary = "a checkpoint finetuned with --task " + t.name;
  m.predictions = true;
  m.max_examples = true;
  m.task = t.name;
  m.source = t.source;
  m.run = [name = t.name](const MetricInputs& in) { return run_task_metric(in, name); };
  return m;
}

}  // namespace

std::shared_ptr<models::Model> MetricInputs::load(const std::string& architecture, bool companions_required) const {
  auto model = models::load_pretrained(checkpoint, architecture, nullptr, Json::object(), false, companions_required);
  models::check_vocabulary(*model, tokenizer.vocab_size(), checkpoint);
  return model;
}

std::vector<MetricSpec> metrics() {
  std::vector<MetricSpec> out = own();
  for (const auto& t : tasks()) out.push_back(task_metric(t));
  out.insert(out.end(), registered().begin(), registered().end());
  return out;
}

void register_metric(MetricSpec spec) {
  check_input(!spec.name.empty() && spec.run != nullptr, registering_source() + ": a metric needs a name and run");
  for (const auto& m : metrics()) {
    if (m.name == spec.name) {
      throw InputError("metric '" + spec.name + "' is registered twice: by " + m.source +
                       (m.task.empty() ? "" : " (task " + m.task + ")") + " and by " + registering_source());
    }
  }
  spec.source = registering_source();
  registered().push_back(std::move(spec));
}

MetricSpec metric(const std::string& name) {
  std::vector<std::string> names;
  for (auto& m : metrics()) {
    if (m.name == name) return m;
    names.push_back(m.name);
  }
  throw InputError("--metric '" + name + "' is not one of " + join_names(names, " or "));
}

std::string metric_help() {
  std::string text;
  for (const auto& m : metrics()) text += (text.empty() ? "" : "; ") + m.name + ": " + m.summary;
  return text;
}

MetricFlags add_metric_flags(CLI::App& app) {
  MetricFlags out;
  for (const auto& m : metrics()) {
    if (!m.add_flags) continue;
    std::set<std::string> before;
    for (const CLI::Option* o : app.get_options()) before.insert(o->get_name());
    call_registered(m.source, "metric '" + m.name + "': add_flags", [&] { m.add_flags(app); });
    std::vector<std::string> added;
    for (const CLI::Option* o : app.get_options()) {
      if (!before.count(o->get_name())) added.push_back(o->get_name());
    }
    out.added.emplace_back(m.name, std::move(added));
  }
  return out;
}

void MetricFlags::check_given(const CLI::App& app, const MetricSpec& chosen) const {
  for (const auto& [name, flags] : added) {
    if (name == chosen.name) continue;
    for (const auto& flag : flags) {
      const bool reads = std::find(chosen.also_reads.begin(), chosen.also_reads.end(), flag) != chosen.also_reads.end();
      if (app.count(flag) == 0 || reads) continue;
      std::vector<std::string> takers = {name};
      for (const auto& m : metrics()) {
        if (m.name != name && std::find(m.also_reads.begin(), m.also_reads.end(), flag) != m.also_reads.end()) takers.push_back(m.name);
      }
      throw InputError(flag + " applies to --metric " + join_names(takers, " or ") + ", not " + chosen.name);
    }
  }
}

}  // namespace lmkit::tasks
