#include "lmkit/models/registry.h"

#include <ATen/ATen.h>

#include <filesystem>
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

namespace {

std::shared_ptr<Model> build_model(const Json& config, const std::string& file, const std::string& architecture) {
  if (!config.is_object()) throw InputError(file + ": the model config must be a JSON object");
  if (!config.contains("model_type") || !config["model_type"].is_string()) {
    throw InputError(file + ": key 'model_type' is required (" + family_names() + ")");
  }
  const std::string type = config["model_type"].get<std::string>();
  const Family* f = nullptr;
  try {
    f = &family(type);
  } catch (const Error& e) {
    throw InputError(file + ": " + e.what());
  }
  std::string arch = architecture;
  if (arch.empty() && config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  if (arch.empty()) arch = f->architectures.front();
  if (!f->builds(arch)) {
    throw InputError(file + ": architecture '" + arch + "' is not supported for model_type '" + type + "' (" +
                     join_names(f->architectures) + ")");
  }
  return f->create(config, file, arch);
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
    out.emplace_back(t.name, g.defined() ? g.contiguous() : g);
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

void save_pretrained(Model& model, const std::string& dir, const std::function<void(const std::string&)>& extra) {
  Json config = model.config_json();
  config["architectures"] = Json::array({model.architecture()});
  config["torch_dtype"] = "float32";
  const auto state = hf_state_dict(model);
  io::write_directory_atomic(dir, [&](const std::string& tmp) {
    save_json_file(tmp + "/config.json", config);
    io::write_safetensors(tmp + "/model.safetensors", state, {{"format", "pt"}});
    if (extra) extra(tmp);
  });
}

std::shared_ptr<Model> load_pretrained(const std::string& dir, const std::string& architecture, LoadReport* report,
                                       const Json& overrides) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(dir + ": not a checkpoint directory");
  const std::string config_path = dir + "/config.json", weights_path = dir + "/model.safetensors";
  if (!fs::exists(config_path)) throw InputError(dir + ": no config.json (incomplete checkpoint?)");
  if (!fs::exists(weights_path)) throw InputError(dir + ": no model.safetensors (incomplete checkpoint?)");
  Json merged = load_json_file(config_path);
  if (merged.is_object()) {
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      merged[it.key()] = it.value();
      if (it.key() == "num_labels") merged.erase("id2label"), merged.erase("label2id");
    }
  }
  auto model = create_model(merged, config_path, architecture);
  // The checkpoint's own head must be complete; a different, requested head may start fresh.
  Json config = load_json_file(config_path);
  const bool own_head = architecture.empty() || !config.contains("architectures") ||
                        config["architectures"] == Json::array({architecture});
  LoadReport r = load_hf_weights(*model, io::read_safetensors(weights_path), weights_path, own_head);
  if (report) *report = r;
  return model;
}

}  // namespace lmkit::models
