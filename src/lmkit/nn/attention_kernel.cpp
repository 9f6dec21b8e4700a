#include "lmkit/nn/attention_kernel.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/nn/attentions_builtin.h"

namespace lmkit::nn {

namespace {

std::vector<AttentionSpec>& registry() {
  static std::vector<AttentionSpec> all = [] {
    std::vector<AttentionSpec> builtin = {full_attention(), linformer_attention(), relative_attention(),
                                          longformer_attention(), block_sparse_attention_spec()};
    for (auto& a : builtin) a.source = "lmkit";
    return builtin;
  }();
  return all;
}

const Json& field_of(const AttentionSettings& s, const std::string& key) {
  auto it = s.fields.find(key);
  if (it == s.fields.end()) throw InputError("attention: setting '" + key + "' is missing");
  return *it;
}

}  // namespace

AttentionMask AttentionMask::from_parts(const std::vector<at::Tensor>& p, size_t at) {
  AttentionMask m;
  m.bias = p.at(at);
  m.key_ok = p.at(at + 1);
  m.global = p.at(at + 2);
  m.random_blocks = p.at(at + 3);
  m.segment_offsets = p.at(at + 4);
  m.longest_segment = p.at(at + 5);
  return m;
}

int64_t AttentionSettings::integer(const std::string& key) const {
  const Json& v = field_of(*this, key);
  check_input(v.is_number(), "attention: setting '" + key + "' = " + brief_json(v) + " is not a number");
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
}

double AttentionSettings::number(const std::string& key) const {
  const Json& v = field_of(*this, key);
  check_input(v.is_number(), "attention: setting '" + key + "' = " + brief_json(v) + " is not a number");
  return v.get<double>();
}

std::string AttentionSettings::text(const std::string& key) const {
  const Json& v = field_of(*this, key);
  check_input(v.is_string(), "attention: setting '" + key + "' = " + brief_json(v) + " is not a string");
  return v.get<std::string>();
}

double AttentionKernel::flops_per_token(int64_t keys) const {
  return 4.0 * static_cast<double>(keys) * static_cast<double>(settings_.num_heads * settings_.head_dim);
}

const std::vector<AttentionSpec>& attentions() { return registry(); }

void register_attention(AttentionSpec spec) {
  check_input(!spec.name.empty() && spec.create != nullptr, registering_source() + ": an attention needs a name and create");
  for (const auto& a : registry()) {
    check_input(a.name != spec.name, "attention '" + spec.name + "' is registered twice: by " + a.source + " and by " +
                                         registering_source());
  }
  for (const auto& f : spec.fields) {
    check_input(!f.key.empty() && (f.fallback.is_number() || f.fallback.is_string()),
                registering_source() + ": attention '" + spec.name + "': a field needs a key and a number or string default");
  }
  spec.source = registering_source();
  registry().push_back(std::move(spec));
}

std::string attention_names() {
  std::vector<std::string> names;
  for (const auto& a : attentions()) {
    if (!a.family_only) names.push_back(a.name);
  }
  return join_names(names, " or ");
}

const AttentionSpec& attention(const std::string& name) {
  for (const auto& a : attentions()) {
    if (a.name == name) return a;
  }
  throw InputError("unknown attention '" + name + "' (" + attention_names() + ")");
}

std::unique_ptr<AttentionKernel> make_attention_kernel(const std::string& name, torch::nn::Module& host,
                                                       const AttentionSettings& settings) {
  const AttentionSpec& spec = attention(name);
  check_input(!settings.cross || spec.cross, "attention '" + name + "' cannot be cross-attention");
  check_input(!settings.causal || spec.causal, "attention '" + name + "' cannot be a decoder's causal self-attention");
  check_input(settings.window == 0 || spec.window, "attention '" + name + "' cannot take a sliding window");
  if (spec.check) call_registered(spec.source, "attention '" + name + "': check", [&] { spec.check(settings); });
  auto kernel = call_registered(spec.source, "attention '" + name + "': create", [&] { return spec.create(host, settings); });
  if (!kernel) throw RuntimeError(spec.source + ": attention '" + name + "': create returned no kernel");
  return kernel;
}

at::Tensor bias_of(const at::Tensor& allowed, at::ScalarType dtype) {
  const auto opts = at::TensorOptions().dtype(dtype).device(allowed.device());
  return at::where(allowed, at::zeros({}, opts), at::full({}, mask_value(dtype), opts));
}

at::Tensor additive_bias(const AttentionMask& mask, int64_t batch, int64_t keys, at::ScalarType dtype) {
  if (mask.bias.defined() || !mask.key_ok.defined()) return mask.bias;
  return bias_of(mask.key_ok.to(at::kBool).view({batch, 1, 1, keys}), dtype);
}

at::Tensor real_keys(const AttentionMask& mask, int64_t batch, int64_t keys, const char* what) {
  if (mask.key_ok.defined()) return mask.key_ok.to(at::kBool).expand({batch, keys});
  const at::Tensor& bias = mask.bias;
  if (!bias.defined()) return {};
  check_input(bias.numel() == bias.size(0) * keys,
              std::string("attention: ") + what + " takes a per-key mask (B, T), not a bias over queries (a document or causal mask)");
  return bias.reshape({-1, keys}).eq(0).expand({batch, keys});
}

}  // namespace lmkit::nn
