// A plugin that breaks the plugin contract in the way $LMKIT_HOSTILE names, for the
// plugin-boundary tests (tests/apps/plugin_boundary_test.cpp): every case must end the
// app with one `error:` line naming this file, never a crash. Unset, it registers nothing.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/task.h"

namespace {

std::string hostile() {
  const char* v = std::getenv("LMKIT_HOSTILE");
  return v ? v : "";
}

// A family "hostile" whose create returns nothing or throws, with or without adopt_vocabulary.
void register_family(const std::string& mode) {
  lmkit::models::Family f;
  f.model_type = "hostile";
  f.architectures = {"HostileForMaskedLM"};
  f.objectives = {{"mlm", "HostileForMaskedLM"}};
  f.tokenizer_family = "bert";
  f.create = [mode](const lmkit::Json&, const std::string&, const std::string&) -> std::shared_ptr<lmkit::models::Model> {
    if (mode == "create-throws-int") throw 7;
    return nullptr;
  };
  if (mode != "no-adopt") f.adopt_vocabulary = [](lmkit::Json& c, int64_t v, int32_t, int32_t) { c["vocab_size"] = v; };
  lmkit::models::register_family(std::move(f));
}

// An objective "hostile-obj" for GPT-2 whose make_dataset returns nothing and that has no synthetic_batch.
void register_objective() {
  lmkit::data::ObjectiveSpec o;
  o.name = "hostile-obj";
  o.summary = "returns no dataset";
  o.make_dataset = [](const lmkit::data::ObjectiveInputs&) -> std::shared_ptr<lmkit::data::Dataset> { return nullptr; };
  lmkit::data::register_objective(std::move(o));
  lmkit::models::add_family_objective("gpt2", {"hostile-obj", "GPT2LMHeadModel"});
}

void register_task() {
  lmkit::tasks::TaskSpec t;
  t.name = "hostile-task";
  t.summary = "creates no task";
  t.head = lmkit::models::kClassificationHead;
  t.metric = "hostile-metric";
  t.create = []() -> std::unique_ptr<lmkit::tasks::Task> { return nullptr; };
  lmkit::tasks::register_task(std::move(t));
}

void register_hostile() {
  const std::string mode = hostile();
  if (mode == "throw-int") throw 42;
  if (mode == "throw-cstring") throw "boom";
  if (mode == "throw-std") throw std::runtime_error("boom");
  if (mode == "input-error") throw lmkit::InputError("bad setting");
  if (mode == "null-model" || mode == "create-throws-int" || mode == "no-adopt") register_family(mode);
  if (mode == "objective") register_objective();
  if (mode == "task") register_task();
}

}  // namespace

extern "C" const char* lmkit_plugin_lmkit_version() { return hostile() == "null-version" ? nullptr : LMKIT_VERSION; }
extern "C" const char* lmkit_plugin_torch_version() { return LMKIT_TORCH_VERSION; }
extern "C" void lmkit_plugin_register() { register_hostile(); }
