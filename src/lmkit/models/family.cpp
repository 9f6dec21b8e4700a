#include "lmkit/models/family.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/models/bert.h"
#include "lmkit/models/bloom.h"
#include "lmkit/models/gpt.h"
#include "lmkit/models/llama.h"
#include "lmkit/models/model.h"
#include "lmkit/models/big_bird.h"
#include "lmkit/models/longformer.h"
#include "lmkit/models/roberta.h"
#include "lmkit/models/t5.h"
#include "lmkit/models/transformer.h"
#include "lmkit/models/vit.h"

namespace lmkit::models {

namespace {

std::vector<Family>& registry() {
  // One line per family: its descriptor lives beside its model.
  static std::vector<Family> all = [] {
    std::vector<Family> builtin = {bert_family(), gpt_family(), t5_family(), transformer_family(), roberta_family(),
                                   llama_family(), mistral_family(), bloom_family(), longformer_family(),
                                   big_bird_family(), vit_family(), vit_mae_family()};
    for (auto& f : builtin) f.source = "lmkit";
    return builtin;
  }();
  return all;
}

Family* find_family(const std::string& model_type) {
  for (auto& f : registry()) {
    if (f.model_type == model_type) return &f;
  }
  return nullptr;
}

}  // namespace

const std::vector<Family>& families() { return registry(); }

void register_family(Family f) {
  check_input(!f.model_type.empty() && !f.architectures.empty() && f.create != nullptr,
              registering_source() + ": a family needs a model_type, architectures and create");
  if (const Family* known = find_family(f.model_type)) {
    throw InputError("model_type '" + f.model_type + "' is registered twice: by " + known->source + " and by " +
                     registering_source());
  }
  f.source = registering_source();
  registry().push_back(std::move(f));
}

void add_family_objective(const std::string& model_type, Objective objective) {
  Family* f = find_family(model_type);
  if (!f) throw InputError(registering_source() + ": unknown model_type '" + model_type + "' (expected " + family_names() + ")");
  check_input(f->builds(objective.architecture), registering_source() + ": model_type '" + model_type +
                                                     "' does not build '" + objective.architecture + "'");
  for (const auto& o : f->objectives) {
    check_input(o.name != objective.name, registering_source() + ": model_type '" + model_type +
                                              "' already pretrains with objective '" + objective.name + "'");
  }
  f->objectives.push_back(std::move(objective));
}

const Family& family(const std::string& model_type) {
  if (const Family* f = find_family(model_type)) return *f;
  throw InputError("unknown model_type '" + model_type + "' (expected " + family_names() + ")");
}

std::vector<const Family*> families_with(const std::string& objective) {
  std::vector<const Family*> with;
  for (const auto& f : families()) {
    for (const auto& o : f.objectives) {
      if (o.name == objective) with.push_back(&f);
    }
  }
  return with;
}

std::string family_names() {
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.model_type);
  return join_names(names, " or ");
}

const Objective& Family::objective(const std::string& name) const {
  if (name.empty()) return objectives.front();
  for (const auto& o : objectives) {
    if (o.name == name) return o;
  }
  std::vector<std::string> names;
  for (const auto& o : objectives) names.push_back(o.name);
  throw InputError("objective '" + name + "' does not apply to model_type '" + model_type + "' (use " +
                   join_names(names, " or ") + ")");
}

int64_t Family::max_length(const Json& config) const {
  if (positions_key.empty() || !config.is_object() || !config.contains(positions_key)) return 0;
  if (!max_length_of) return config[positions_key].get<int64_t>();
  return call_registered(source, "model_type '" + model_type + "': max_length_of", [&] { return max_length_of(config); });
}

void Family::fit_vocabulary(Json& config, int64_t vocab_size, int32_t pad_id, int32_t eos_id) const {
  check_input(adopt_vocabulary != nullptr, source + ": model_type '" + model_type + "' has no adopt_vocabulary, so a " +
                                               "preset cannot take a trained tokenizer's vocabulary (the plugin's Family::adopt_vocabulary)");
  call_registered(source, "model_type '" + model_type + "': adopt_vocabulary",
                  [&] { adopt_vocabulary(config, vocab_size, pad_id, eos_id); });
}

bool Family::builds(const std::string& architecture) const {
  return std::find(architectures.begin(), architectures.end(), architecture) != architectures.end();
}

std::string Family::head(const std::string& name) const {
  const auto it = heads.find(name);
  return it == heads.end() ? "" : it->second;
}

const std::string& Family::head_or_error(const std::string& name) const {
  const auto it = heads.find(name);
  if (it != heads.end()) return it->second;
  std::vector<std::string> with;
  for (const auto& other : families()) {
    if (other.heads.count(name)) with.push_back(other.model_type);
  }
  throw InputError("model_type '" + model_type + "' has no " + name + " head" +
                   (with.empty() ? std::string(" (no family has one)") : " (" + join_names(with, " or ") + " have one)"));
}

int64_t count_targets(const Model& model, const Batch& b) {
  if (b.rows() == 0) return 0;
  if (!b.labels.defined()) return b.rows();  // one target a row (an image's reconstruction, a QA span)
  if (b.labels.dim() == 1) return b.labels.size(0);  // classification
  const at::Tensor scored = model.shifted_labels() ? b.labels.slice(1, 1) : b.labels;
  return scored.ne(-100).sum().item<int64_t>();
}

}  // namespace lmkit::models
