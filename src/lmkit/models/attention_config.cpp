#include "lmkit/models/attention_config.h"

#include <algorithm>
#include <limits>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"

namespace lmkit::models {

Json read_attention_field(ConfigReader& r, const nn::AttentionSpec& spec, const nn::AttentionField& f,
                          const std::string& chosen) {
  Json v;
  if (!r.get(f.key, v)) return nullptr;
  const std::string key = r.file() + ": key '" + f.key + "'";
  check_input(chosen == spec.name, key + " is attention '" + spec.name + "''s, and this config's attention is '" + chosen +
                                       "' (set \"attention\": \"" + spec.name + "\" or remove the key)");
  // Read again as its type: the reader's own messages ("must be one of ...", "must be >= 1").
  if (f.fallback.is_string()) {
    std::string text;
    if (f.choices.empty()) r.get(f.key, text);
    else r.get_choice(f.key, text, std::set<std::string>(f.choices.begin(), f.choices.end()));
    return text;
  }
  const bool unbounded = f.max >= 1e18;  // AttentionField's default max: the message says ">= min", not "in [min, 1e18]"
  if (f.fallback.is_number_integer()) {
    int64_t n = 0;
    r.get(f.key, n, static_cast<int64_t>(f.min), unbounded ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(f.max));
    return n;
  }
  double x = 0;
  r.get(f.key, x, f.min, unbounded ? std::numeric_limits<double>::max() : f.max);
  return x;
}

Json complete_attention_fields(const std::string& name, Json fields) {
  if (!fields.is_object()) fields = Json::object();
  for (const auto& f : nn::attention(name).fields) {
    if (!fields.contains(f.key)) fields[f.key] = f.fallback;
  }
  return fields;
}

void check_family_attention(const std::string& name, bool causal, const std::string& file) {
  const nn::AttentionSpec* spec = nullptr;
  for (const auto& a : nn::attentions()) {
    if (a.name == name && !a.family_only) spec = &a;
  }
  check_input(spec != nullptr, file + ": key 'attention' = \"" + name + "\" is not an attention this family takes (" +
                                   nn::attention_names() + ")");
  check_input(!causal || spec->causal, file + ": key 'attention' = \"" + name + "\" cannot be a decoder's causal self-attention");
}

}  // namespace lmkit::models
