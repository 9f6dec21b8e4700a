#include "lmkit/models/summary.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "lmkit/models/registry.h"

namespace lmkit::models {

std::shared_ptr<Model> model_from_path(const std::string& path, bool load_weights, const std::string& architecture) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    if (load_weights) return load_pretrained(path, architecture);
    return create_model(load_json_file(path + "/config.json"), path + "/config.json", architecture);
  }
  if (!fs::exists(path)) throw InputError(path + ": no such preset file or checkpoint directory");
  return create_model(load_json_file(path), path, architecture);
}

Json summarize(Model& model) {
  std::map<std::string, int64_t> components;
  int64_t total = 0;
  for (const auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    std::string group = name.substr(0, name.find('.'));
    if (group == "layers" || group == "encoder_layers" || group == "decoder_layers") group += " (all)";
    components[group] += p.value().numel();
    total += p.value().numel();
  }
  Json j;
  j["model_type"] = model.model_type();
  j["architecture"] = model.architecture();
  j["parameters"] = total;
  j["components"] = components;
  j["memory"] = {{"weights_fp32_mib", total * 4.0 / (1 << 20)},
                 {"weights_bf16_mib", total * 2.0 / (1 << 20)},
                 {"training_adamw_fp32_mib", total * 16.0 / (1 << 20)}};
  j["config"] = model.config_json();
  return j;
}

std::string format_summary(const Json& s) {
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  add("%-28s %s (%s)\n", "architecture", s["architecture"].get<std::string>().c_str(),
      s["model_type"].get<std::string>().c_str());
  // The config's sizes: every integer key but token ids, whatever the family calls them
  // (hidden_size, n_embd, d_model, ...).
  const auto& c = s["config"];
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& key = it.key();
    const bool id = key.size() >= 3 && key.compare(key.size() - 3, 3, "_id") == 0;
    if (it.value().is_number_integer() && !id) add("  %-26s %s\n", key.c_str(), it.value().dump().c_str());
  }
  add("%-28s %15s\n", "parameters", "count");
  for (auto it = s["components"].begin(); it != s["components"].end(); ++it) {
    add("  %-26s %15lld\n", it.key().c_str(), static_cast<long long>(it.value().get<int64_t>()));
  }
  add("  %-26s %15lld\n", "total", static_cast<long long>(s["parameters"].get<int64_t>()));
  const auto& m = s["memory"];
  add("%-28s %10.1f MiB\n", "weights (fp32)", m["weights_fp32_mib"].get<double>());
  add("%-28s %10.1f MiB\n", "weights (bf16)", m["weights_bf16_mib"].get<double>());
  add("%-28s %10.1f MiB  (weights + grads + AdamW moments; activations extra)\n", "training state (fp32)",
      m["training_adamw_fp32_mib"].get<double>());
  return out;
}

std::string format_fields(const Json& fields) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %-14s %-14s %s\n", "config key", "value", "default", "must be");
  out += line;
  for (const auto& f : fields) {
    const std::string value = brief_json(f["value"], 14), fallback = brief_json(f["default"], 14);
    const char* changed = f["value"] == f["default"] ? " " : "*";
    std::snprintf(line, sizeof line, "%s %-32s %-14s %-14s %s\n", changed, f["key"].get<std::string>().c_str(), value.c_str(),
                  fallback.c_str(), f["check"].get<std::string>().c_str());
    out += line;
  }
  return out;
}

}  // namespace lmkit::models
