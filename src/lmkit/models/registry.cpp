#include "lmkit/core/plugin.h"
#include "lmkit/models/registry.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <cstdio>
#include <regex>
#include <map>
#include <set>

#include "lmkit/core/names.h"
#include "lmkit/core/runtime.h"
#include "lmkit/io/checkpoint.h"
#include "lmkit/models/family.h"

namespace lmkit::models {

std::vector<std::string> supported_architectures(const std::string& model_type) {
  for (const auto& f : families()) {
    if (f.model_type == model_type) return f.architectures;
  }
  return {};
}

std::string pretraining_objective(const std::string& model_type, const std::string& objective) {
  return family(model_type).objective(objective).name;
}

std::string pretraining_architecture(const std::string& model_type, const std::string& objective) {
  return family(model_type).objective(objective).architecture;
}

std::string config_architecture(const Json& config) {
  if (!config.is_object() || !config.contains("architectures")) return "";
  const Json& archs = config["architectures"];
  return archs.is_array() && !archs.empty() && archs[0].is_string() ? archs[0].get<std::string>() : "";
}

const Family& family_of_config(const Json& config, const std::string& file) {
  if (!config.is_object()) throw InputError(file + ": the model config must be a JSON object");
  if (!config.contains("model_type")) throw InputError(file + ": key 'model_type' is required (" + family_names() + ")");
  if (!config["model_type"].is_string()) {
    throw InputError(file + ": key 'model_type' must be a string (" + family_names() + "), not " +
                     config["model_type"].dump().substr(0, 40));
  }
  const std::string type = config["model_type"].get<std::string>();
  try {
    return family(type);
  } catch (const Error& e) {
    // A checkpoint of a plugin's family says which plugin built it (save_pretrained).
    const std::string record = (std::filesystem::path(file).parent_path() / kPluginRecord).string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(record, ec)) {
      const Json j = load_json_file(record);
      if (j.is_object() && j.value("model_type", "") == type && j.contains("plugin") && j["plugin"].is_string()) {
        const std::string plugin = j["plugin"].get<std::string>();
        throw InputError(file + ": model_type '" + type + "' comes from a plugin: pass --plugin " + plugin);
      }
    }
    throw InputError(file + ": " + e.what());
  }
}

namespace {

std::shared_ptr<Model> build_model(const Json& config, const std::string& file, const std::string& architecture) {
  const Family* f = &family_of_config(config, file);
  const std::string type = f->model_type;
  std::string arch = architecture.empty() ? config_architecture(config) : architecture;
  if (arch.empty()) arch = f->architectures.front();
  if (!f->builds(arch)) {
    throw InputError(file + ": architecture '" + arch + "' is not supported for model_type '" + type + "' (" +
                     join_names(f->architectures) + ")");
  }
  auto model = call_registered(f->source, "model_type '" + type + "': create", [&] { return f->create(config, file, arch); });
  if (!model) throw RuntimeError(f->source + ": model_type '" + type + "': create returned no model for " + arch);
  return model;
}

}  // namespace

std::shared_ptr<Model> create_model(const Json& config, const std::string& file, const std::string& architecture) {
  try {
    return build_model(config, file, architecture);
  } catch (const c10::Error& e) {
    // Sizes that pass each key's range check can still multiply past any memory
    // (hidden_size 10^12): the config is at fault, so exit 2 naming it.
    const auto oom = out_of_memory(e);
    if (!oom) throw;
    throw InputError(file + ": the model it describes does not fit in memory (" + *oom + "); check its sizes");
  }
}

std::vector<std::pair<std::string, at::Tensor>> hf_state_dict(Model& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& t : model.hf_tensors()) {
    out.emplace_back(t.name, (t.transpose ? t.param.t() : t.param).detach().contiguous());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> hf_gradients(Model& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& t : model.hf_tensors()) {
    // A row slice of a fused parameter (Q of qkv) has no .grad of its own: slice the base's.
    const at::Tensor base = t.param.is_view() ? at::Tensor(t.param._base()) : t.param;
    at::Tensor g = base.grad();
    if (g.defined() && t.param.is_view()) {
      const int64_t row = (t.param.storage_offset() - base.storage_offset()) / base.stride(0);
      g = g.slice(0, row, row + t.param.size(0));
    }
    if (g.defined() && t.transpose) g = g.t();
    // A parameter the loss does not reach (BigBird's pooler under a token classifier): its gradient is zero.
    out.emplace_back(t.name, g.defined() ? g.contiguous() : at::zeros_like(t.transpose ? t.param.t() : t.param));
  }
  return out;
}

LoadReport load_hf_weights(Model& model, const io::TensorFile& file, const std::string& file_name, bool strict) {
  LoadReport report;
  const auto tensors = file.as_map();
  std::set<std::string> used;
  const std::string prefix = model.hf_base_prefix();
  at::NoGradGuard no_grad;
  for (const auto& t : model.hf_tensors()) {
    std::vector<std::string> candidates{t.name};
    if (!prefix.empty()) {
      if (t.name.rfind(prefix, 0) == 0) candidates.push_back(t.name.substr(prefix.size()));
      else candidates.push_back(prefix + t.name);
    }
    candidates.insert(candidates.end(), t.aliases.begin(), t.aliases.end());
    auto found = tensors.end();
    for (const auto& name : candidates) {
      found = tensors.find(name);
      if (found != tensors.end()) break;
    }
    if (found == tensors.end()) {
      report.missing.push_back(t.name);
      continue;
    }
    used.insert(found->first);
    at::Tensor src = t.transpose ? found->second.t() : found->second;
    if (src.sizes() != t.param.sizes()) {
      throw InputError(file_name + ": tensor '" + found->first + "' has shape " + c10::str(found->second.sizes()) +
                       " but the model expects " + c10::str(t.transpose ? t.param.t().sizes() : t.param.sizes()));
    }
    // Float weights stored as integers (or the reverse) would load as numbers of another kind.
    if (src.is_floating_point() != t.param.is_floating_point()) {
      throw InputError(file_name + ": tensor '" + found->first + "' is " + std::string(c10::toString(src.scalar_type())) +
                       " but the model's parameter is " + c10::toString(t.param.scalar_type()));
    }
    if (!io::all_finite(src)) {
      throw InputError(file_name + ": tensor '" + found->first + "' holds NaN or Inf values (a diverged run's weights?)");
    }
    t.param.copy_(src.to(t.param.scalar_type()));
  }
  for (const auto& [name, tensor] : tensors) {
    if (!used.count(name) && !model.hf_ignorable(name)) report.unexpected.push_back(name);
  }
  if (strict && !report.missing.empty()) {
    throw InputError(file_name + ": missing tensor '" + report.missing.front() + "'" +
                     (report.missing.size() > 1 ? " and " + std::to_string(report.missing.size() - 1) + " more" : "") +
                     " for " + model.architecture());
  }
  return report;
}

namespace {

// config.json, the plugin record and model.safetensors of `model` into the folder `dir`
// (inside a directory being written); `state` is its hf_state_dict, checked finite.
void write_model_files(Model& model, const std::string& dir,
                       const std::vector<std::pair<std::string, at::Tensor>>& state) {
  Json config = model.config_json();
  config["architectures"] = Json::array({model.architecture()});
  config["torch_dtype"] = "float32";
  save_json_file(dir + "/config.json", config);
  const Family& f = family(model.model_type());
  if (f.source != "lmkit") {
    save_json_file(dir + "/" + kPluginRecord,
                   {{"model_type", f.model_type}, {"plugin", std::filesystem::absolute(f.source).lexically_normal().string()}});
  }
  io::write_safetensors(dir + "/model.safetensors", state, {{"format", "pt"}});
}

std::vector<std::pair<std::string, at::Tensor>> finite_state(Model& model, const std::string& dir) {
  auto state = hf_state_dict(model);
  for (const auto& [name, tensor] : state) {
    if (!io::all_finite(tensor)) {
      throw RuntimeError("not writing " + dir + ": weight '" + name + "' holds NaN or Inf values");
    }
  }
  return state;
}

}  // namespace

void save_pretrained(Model& model, const std::string& dir, const std::function<void(const std::string&)>& extra) {
  const auto state = finite_state(model, dir);
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> companion_states;
  for (const auto& [folder, companion] : model.companions()) companion_states.push_back(finite_state(*companion, dir + "/" + folder));
  io::write_directory_atomic(dir, [&](const std::string& tmp) {
    write_model_files(model, tmp, state);
    size_t i = 0;
    for (const auto& [folder, companion] : model.companions()) {
      std::filesystem::create_directories(tmp + "/" + folder);
      write_model_files(*companion, tmp + "/" + folder, companion_states[i++]);
    }
    if (extra) extra(tmp);
  });
}

std::vector<std::string> load_companions(Model& model, const std::string& dir) {
  std::vector<std::string> read;
  at::NoGradGuard no_grad;
  for (const auto& [folder, companion] : model.companions()) {
    const std::string weights = dir + "/" + folder + "/model.safetensors";
    if (!std::filesystem::exists(weights)) continue;
    const LoadReport r = load_hf_weights(*companion, io::read_safetensors(weights), weights, /*strict=*/true);
    if (!r.unexpected.empty()) {
      throw InputError(weights + ": holds '" + r.unexpected.front() + "', which the " + folder + " (" +
                       companion->architecture() + ") does not have");
    }
    read.push_back(folder);
  }
  return read;
}

namespace {

// "transformer.h.3.attn.c_attn.weight" -> "transformer.h.#.attn.c_attn.weight": the same tensor of another layer.
std::string layer_pattern(const std::string& name) { return std::regex_replace(name, std::regex("\\.[0-9]+\\."), ".#."); }

// What from_pretrained says of the tensors that did not match, and what lmkit refuses.
void check_report(const LoadReport& r, const std::string& dir, Model& model, const std::string& own, bool new_head) {
  if (!r.missing.empty() && !new_head) {
    throw InputError(dir + ": the checkpoint (" + own + ") lacks " + std::to_string(r.missing.size()) + " tensor(s) that " +
                     model.architecture() + " needs (" + first_names(r.missing) +
                     "); a head it does not have would be random");
  }
  if (!r.missing.empty()) {
    std::fprintf(stderr, "%s: %zu tensor(s) of %s are not in the checkpoint and start from random initialisation (%s)\n",
                 dir.c_str(), r.missing.size(), model.architecture().c_str(), first_names(r.missing).c_str());
  }
  if (r.unexpected.empty()) return;
  std::set<std::string> used;
  for (const auto& t : model.hf_tensors()) used.insert(layer_pattern(t.name));
  const std::string base = model.hf_base_prefix();
  for (const auto& name : r.unexpected) {
    // Another layer of a stack the model has, or any numbered layer of the body (n_layer 0 beside layer-0 weights).
    const bool numbered = layer_pattern(name) != name;
    const bool layer = used.count(layer_pattern(name)) || used.count(layer_pattern(base + name)) ||
                       (!base.empty() && name.rfind(base, 0) == 0 && used.count(layer_pattern(name.substr(base.size())))) ||
                       (!base.empty() && numbered && name.rfind(base, 0) == 0);
    if (layer) {
      throw InputError(dir + ": the weights hold '" + name + "', a layer the model built from config.json does not have "
                       "(config.json and model.safetensors disagree)");
    }
  }
  if (own != model.architecture()) {
    // Another head on the same body (a BertForPreTraining read as BertForMaskedLM): expected, and said so.
    std::fprintf(stderr, "note: %s is a %s; %s leaves its %zu other tensor(s) unused (%s)\n", dir.c_str(), own.c_str(),
                 model.architecture().c_str(), r.unexpected.size(), first_names(r.unexpected).c_str());
    return;
  }
  std::fprintf(stderr, "%s: %zu checkpoint tensor(s) are not used by %s (%s)\n", dir.c_str(), r.unexpected.size(),
               model.architecture().c_str(), first_names(r.unexpected).c_str());
}

}  // namespace

void check_vocabulary(const Model& model, int64_t tokenizer_vocab, const std::string& what) {
  const int64_t rows = model.vocab_size();
  if (rows < tokenizer_vocab) {
    throw InputError(what + ": the tokenizer has " + std::to_string(tokenizer_vocab) + " ids but the model's vocabulary only " +
                     std::to_string(rows) + " (a tokenizer of another model?)");
  }
}

namespace {

// `config` as Family::finetunes_as has it when `wanted` says the family's own does not do.
Json converted_when(const Json& config, const std::string& file, const std::function<bool(const Family&)>& wanted) {
  const Family& own = family_of_config(config, file);
  if (wanted(own) || !own.finetunes_as) return config;
  Json converted = own.finetunes_as(config);
  return wanted(family_of_config(converted, file)) ? converted : config;
}

}  // namespace

Json finetuning_config(const Json& config, const std::string& head, const std::string& file) {
  return converted_when(config, file, [&](const Family& f) { return !f.head(head).empty(); });
}

std::shared_ptr<Model> load_pretrained(const std::string& dir, const std::string& architecture, LoadReport* report,
                                       const Json& overrides, bool new_head, bool companions_required) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(dir + ": not a checkpoint directory");
  const std::string config_path = dir + "/config.json", weights_path = dir + "/model.safetensors";
  if (!fs::exists(config_path)) throw InputError(dir + ": no config.json (incomplete checkpoint?)");
  if (!fs::exists(weights_path)) throw InputError(dir + ": no model.safetensors (incomplete checkpoint?)");
  const Json written = load_json_file(config_path);
  // An MAE checkpoint read as ViTForImageClassification is read as the ViT it finetunes as.
  Json merged = architecture.empty() ? written
                                     : converted_when(written, config_path, [&](const Family& f) { return f.builds(architecture); });
  if (merged.is_object()) {
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      merged[it.key()] = it.value();
      if (it.key() == "num_labels") merged.erase("id2label"), merged.erase("label2id");
    }
  }
  // Without a new head every weight comes from the checkpoint (one it lacks is an error below):
  // no random draw first, unless a companion's folder is missing (it keeps its initialisation).
  std::shared_ptr<Model> model;
  {
    const SkipWeightInit skip(!new_head);
    model = create_model(merged, config_path, architecture);
  }
  const auto companions = model->companions();
  if (!new_head && std::any_of(companions.begin(), companions.end(), [&](const auto& c) {
        return !fs::exists(dir + "/" + c.first + "/model.safetensors");
      })) {
    model = create_model(merged, config_path, architecture);
  }
  LoadReport r = load_hf_weights(*model, io::read_safetensors(weights_path), weights_path, /*strict=*/false);
  std::string own = config_architecture(written);
  if (own.empty()) own = written.value("model_type", model->model_type());
  check_report(r, dir, *model, own, new_head);
  const auto read = load_companions(*model, dir);
  for (const auto& [folder, companion] : model->companions()) {
    if (std::find(read.begin(), read.end(), folder) != read.end()) continue;
    const std::string what = dir + ": no " + folder + "/model.safetensors (the " + companion->architecture() +
                             " trained beside the model)";
    if (companions_required) throw InputError(what + ": this needs it; use the complete checkpoint directory");
    std::fprintf(stderr, "warning: %s: it starts from random initialisation\n", what.c_str());
    r.missing_companions.push_back(folder);
  }
  if (report) *report = r;
  return model;
}

}  // namespace lmkit::models
