// The config keys of the families that offer the registered attentions (nn/attention_kernel.h):
// "attention" names one, and each attention's own keys (AttentionSpec::fields) are read,
// written and listed with it, and refused by name with another.
#pragma once

#include <string>
#include <vector>

#include "lmkit/core/config_table.h"
#include "lmkit/nn/attention_kernel.h"

namespace lmkit::models {

/// One attention field's value from `r` for a config whose attention is `chosen`: the value
/// (range or choice checked), or null when absent; InputError when present with another attention.
Json read_attention_field(ConfigReader& r, const nn::AttentionSpec& spec, const nn::AttentionField& f,
                          const std::string& chosen);
/// `fields` with the fallback of every field of attention `name` it lacks.
Json complete_attention_fields(const std::string& name, Json fields);
/// Refuses an attention a family cannot run: unknown, chosen by a family of its own
/// (Longformer's, BigBird's), or not causal where the family decodes (`causal`).
void check_family_attention(const std::string& name, bool causal, const std::string& file);

/// The rows "attention" and every registered attention's own keys, for a config C holding the
/// name in `name` and the attention's settings in `fields` (read after "attention").
template <class C>
std::vector<ConfigField<C>> attention_config_fields(std::string C::*name, Json C::*fields) {
  std::vector<ConfigField<C>> rows;
  ConfigField<C> choice{"attention", "a registered attention (lmkit-info --registered)",
                        [=](ConfigReader& r, C& c) { r.get("attention", c.*name); },
                        [=](const C& c) { return Json(c.*name); }, {}, {}, {}};
  rows.push_back(choice.when([=](const C& c) { return c.*name != "full"; }));
  for (const nn::AttentionSpec& spec : nn::attentions()) {
    for (const nn::AttentionField& f : spec.fields) {
      ConfigField<C> row{f.key, f.help,
                         [=](ConfigReader& r, C& c) {
                           Json v = read_attention_field(r, spec, f, c.*name);
                           if (!v.is_null()) (c.*fields)[f.key] = v;
                         },
                         [=](const C& c) {
                           const Json all = complete_attention_fields(spec.name, c.*fields);
                           return all.contains(f.key) ? all[f.key] : f.fallback;
                         },
                         {}, {}, {}};
      const std::string owner = spec.name;
      auto owns = [=](const C& c) { return c.*name == owner; };
      rows.push_back(row.when(owns).listed_when(owns));
    }
  }
  return rows;
}

}  // namespace lmkit::models
