#include "lmkit/models/llama.h"

#include <ATen/ATen.h>

#include <tuple>

#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/decoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/nn/linear.h"
#include "lmkit/nn/position.h"
#include "lmkit/nn/recompute.h"

namespace lmkit::models {

namespace {

const ArchitectureTable<DecoderHead>& architectures_of(const std::string& model_type) {
  static const auto llama = decoder_architectures("Llama", "ForCausalLM");
  static const auto mistral = decoder_architectures("Mistral", "ForCausalLM");
  return model_type == "mistral" ? mistral : llama;
}

// rope_theta from transformers 5's rope_parameters {rope_type, rope_theta}, or the older
// top-level rope_theta and rope_scaling; written as rope_parameters. Only the original rotary
// scheme is implemented: a scaled one (linear, dynamic, yarn, llama3) is refused, not run as
// the plain one.
ConfigField<LlamaConfig> rope_field() {
  auto read = [](ConfigReader& r, LlamaConfig& c) {
    auto scaled = [&](const std::string& type) {
      throw InputError(r.file() + ": rope type '" + type + "' is not supported (lmkit implements rope_type 'default')");
    };
    auto theta = [&](ConfigReader& from) {
      if (from.get("rope_theta", c.rope_theta) && !(c.rope_theta > 0)) {
        throw InputError(r.file() + ": key '" + from.key_path("rope_theta") + "' must be a positive number");
      }
    };
    theta(r);
    Json scaling, params;
    if (r.get("rope_scaling", scaling) && !scaling.is_null()) {
      // The type as written, whatever its JSON type ({"type": 5} once gave nlohmann's raw type_error.302).
      const Json* type = !scaling.is_object() ? nullptr : scaling.contains("rope_type") ? &scaling["rope_type"]
                                                        : scaling.contains("type")       ? &scaling["type"]
                                                                                         : nullptr;
      scaled(type == nullptr ? scaling.dump() : type->is_string() ? type->get<std::string>() : type->dump());
    }
    if (!r.get("rope_parameters", params) || params.is_null()) return;
    ConfigReader p(params, r.file(), "rope_parameters");
    std::string type = "default";
    p.get("rope_type", type);
    if (type != "default") scaled(type);
    theta(p);
    p.finish();
  };
  return {"rope_theta", "number > 0 (rope_parameters.rope_theta)", read, [](const LlamaConfig& c) { return Json(c.rope_theta); },
          {}, [](Json& j, const LlamaConfig& c) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}; }, {}};
}

}  // namespace

LlamaConfig LlamaConfig::defaults(const std::string& model_type) {
  LlamaConfig c;
  c.model_type = model_type;
  if (model_type == "mistral") {  // MistralConfig's defaults (Mistral-7B-v0.1)
    c.intermediate_size = 14336;
    c.num_key_value_heads = 8;
    c.max_position_embeddings = 4096 * 32;
    c.sliding_window = 4096;
  }
  return c;
}

const ConfigTable<LlamaConfig>& LlamaConfig::table(const std::string& model_type) {
  using C = LlamaConfig;
  auto make = [](bool mistral) {
    std::vector<ConfigField<C>> f = {
        fields::number("vocab_size", &C::vocab_size, int64_t{1}),
        fields::number("hidden_size", &C::hidden_size, int64_t{1}),
        fields::number("intermediate_size", &C::intermediate_size, int64_t{1}),
        fields::number("num_hidden_layers", &C::num_hidden_layers, int64_t{0}),
        fields::number("num_attention_heads", &C::num_attention_heads, int64_t{1}),
        fields::nullable("num_key_value_heads", &C::num_key_value_heads, int64_t{0}, int64_t{1}),
        fields::nullable("head_dim", &C::head_dim, int64_t{0}, int64_t{1}),
        fields::number("max_position_embeddings", &C::max_position_embeddings, int64_t{1}),
        fields::number("rms_norm_eps", &C::rms_norm_eps, 0.0),
        fields::number("initializer_range", &C::initializer_range, 0.0),
        fields::number("attention_dropout", &C::attention_dropout, 0.0, 1.0),
        fields::fixed<C>("hidden_act", "silu"),
        rope_field()};
    if (mistral) f.push_back(fields::nullable("sliding_window", &C::sliding_window, int64_t{0}, int64_t{1}));
    if (!mistral) f.push_back(fields::flag("attention_bias", &C::attention_bias));
    if (!mistral) f.push_back(fields::flag("mlp_bias", &C::mlp_bias));
    for (auto& field : decoder_head_fields<C>(0.1)) f.push_back(field);
    return ConfigTable<C>(f, {"use_cache", "pretraining_tp"});
  };
  static const ConfigTable<C> llama = make(false), mistral = make(true);
  return model_type == "mistral" ? mistral : llama;
}

LlamaConfig LlamaConfig::from_json(const Json& j, const std::string& file, const std::string& model_type) {
  LlamaConfig c = defaults(model_type);
  read_hf_config(table(model_type), j, file, c);
  settle_decoder_token_ids(j, file, c.vocab_size, c.bos_token_id, c.eos_token_id, c.pad_token_id);
  if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0) {
    throw InputError(file + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
                     std::to_string(c.num_attention_heads) + " (give head_dim)");
  }
  if (c.num_attention_heads % c.kv_heads() != 0) {
    throw InputError(file + ": num_attention_heads " + std::to_string(c.num_attention_heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(c.kv_heads()));
  }
  if (c.head_size() % 2 != 0) throw InputError(file + ": the head size " + std::to_string(c.head_size()) + " must be even (rotary pairs)");
  return c;
}

Json LlamaConfig::to_json() const {
  Json j = write_hf_config(table(model_type), model_type, *this);
  j["num_key_value_heads"] = kv_heads();  // resolved, as HF writes them
  j["head_dim"] = head_size();
  return j;
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(c.mlp_bias)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(c.hidden_size, c.intermediate_size).bias(c.mlp_bias)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(c.intermediate_size, c.hidden_size).bias(c.mlp_bias)));
}

at::Tensor LlamaMlpImpl::forward(const at::Tensor& x) {
  const at::Tensor gate = nn::linear(x, gate_proj->weight, gate_proj->bias);
  const at::Tensor up = nn::linear(x, up_proj->weight, up_proj->bias);
  at::Tensor h = nn::swiglu_cpu(gate, up);  // one pass each way where it applies
  if (!h.defined()) h = at::silu(gate) * up;
  return nn::linear(h, down_proj->weight, down_proj->bias);
}

LlamaLayerImpl::LlamaLayerImpl(const LlamaConfig& c) {
  const auto rms = nn::NormOptions(c.hidden_size).type(nn::NormType::kRmsNorm).eps(c.rms_norm_eps);
  input_layernorm = register_module("input_layernorm", nn::Norm(rms));
  self_attn = register_module("self_attn", nn::MultiHeadAttention(nn::MultiHeadAttentionOptions(c.hidden_size, c.num_attention_heads)
                                                                       .head_dim(c.head_size())
                                                                       .kv_heads(c.kv_heads())
                                                                       .separate_qkv(true)
                                                                       .bias(c.attention_bias)
                                                                       .dropout(c.attention_dropout)
                                                                       .causal(true)
                                                                       .window(c.sliding_window)));
  post_attention_layernorm = register_module("post_attention_layernorm", nn::Norm(rms));
  mlp = register_module("mlp", LlamaMlp(c));
}

namespace {

// A norm's output in the residual stream's type, as HF's LlamaRMSNorm returns it (bf16 for a
// bf16 model; a float32 stream's fused path may have written it in bf16 for the linears).
at::Tensor in_stream_type(const at::Tensor& y, const at::Tensor& stream) {
  return y.scalar_type() == at::kFloat && stream.scalar_type() != at::kFloat ? y.to(stream.scalar_type()) : y;
}

}  // namespace

at::Tensor LlamaLayerImpl::forward(const at::Tensor& x, const nn::Rotary& rotary, const nn::AttentionMask& mask,
                                   nn::KVCache* cache) {
  return forward_pending({x, {}, 0.0}, rotary, mask, cache).sum();
}

nn::PendingSum LlamaLayerImpl::forward_pending(const nn::PendingSum& x, const nn::Rotary& rotary,
                                               const nn::AttentionMask& mask, nn::KVCache* cache) {
  // h = x + attn(norm(x)); out = h + mlp(norm(h)), no dropout: each sum and the norm after it one step.
  auto [s, normed] = nn::residual_norm(x, input_layernorm, true);
  const at::Tensor attended = self_attn(in_stream_type(normed, s), mask, at::Tensor(), cache, rotary);
  auto [h, normed_h] = nn::residual_norm(s, attended, 0.0, false, post_attention_layernorm, true);
  return {h, mlp(in_stream_type(normed_h, h)), 0.0};
}

LlamaImpl::LlamaImpl(LlamaConfig config_)  // rotary: no position limit
    : DecoderModel(architectures_of(config_.model_type), config_.head,
                   {false, config_.bos_token_id, config_.eos_token_id, config_.vocab_size, 0}),
      config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, d));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(LlamaLayer(c));
  norm = register_module("norm", nn::Norm(nn::NormOptions(d).type(nn::NormType::kRmsNorm).eps(c.rms_norm_eps)));
  build_head({d, c.vocab_size, c.num_labels, c.tie_word_embeddings, c.classifier_dropout, "score"});
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void LlamaImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);  // HF's _init_weights: N(0, initializer_range), zero biases
  reset_norms(*this);
}

at::Tensor LlamaImpl::decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                             std::vector<nn::LayerCache>* caches, std::vector<at::Tensor>* hidden_states,
                             const Packing& packing) {
  const int64_t t = input_ids.size(1);
  const bool cached = caches && !caches->empty();
  const int64_t past = cached ? (*caches)[0].self_attn.position() : 0;  // positions seen
  const int64_t held = cached ? (*caches)[0].self_attn.length() : 0;    // keys held (a window's last ones)
  if (caches && caches->size() < layers->size()) caches->resize(layers->size());
  at::Tensor x = embed_tokens(input_ids);  // (B, T, D)
  if (hidden_states) hidden_states->push_back(x);
  // HF: position_ids = arange(past, past + T) whatever the padding, rotated in float32; packed documents restart theirs.
  nn::Rotary rotary;
  std::tie(rotary.cos, rotary.sin) =
      packing.position_ids.defined() ? nn::rotary_cos_sin(packing.position_ids, config.head_size(), config.rope_theta, x.device())
                                     : nn::rotary_cos_sin(past, t, config.head_size(), config.rope_theta, x.device());
  nn::AttentionMask mask;  // the window, if any, is the attention's (MultiHeadAttentionOptions::window)
  const int64_t window = config.sliding_window;
  if (packing.document_ids.defined()) {  // the window inside each document
    mask = nn::document_mask(packing.document_ids, attention_mask, true, x.scalar_type(), x.device(), window);
  } else if (window > 0 && held == 0 && t > window) {
    if (attention_mask.defined()) mask.key_ok = attention_mask.to(x.device()).ne(0);  // O(T·window) in the attention
  } else {
    const at::Tensor keys = attention_mask.defined() && attention_mask.size(1) > held + t
                                ? attention_mask.slice(1, attention_mask.size(1) - held - t)  // the keys held
                                : attention_mask;
    mask.bias = nn::attention_bias(keys, true, t, held + t, x.scalar_type(), x.device(), true, window);
  }
  const bool recompute = nn::recompute_layers() && caches == nullptr;
  if (!recompute && hidden_states == nullptr && nn::defers_residual_sums(x)) {
    // The fused path: each layer's last sum is made by the next layer's first norm (or the final one).
    nn::PendingSum r{x, {}, 0.0};
    for (size_t i = 0; i < layers->size(); ++i) {
      auto layer = layers->ptr<LlamaLayerImpl>(i);
      nn::before_layer(*layer);
      r = layer->forward_pending(r, rotary, mask, caches ? &(*caches)[i].self_attn : nullptr);
    }
    return in_stream_type(nn::residual_norm(r, norm).second, x);
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<LlamaLayerImpl>(i);
    nn::before_layer(*layer);  // a sharded optimizer's parameter all-gather may still be arriving
    if (recompute) {
      std::vector<at::Tensor> inputs = {x, rotary.cos, rotary.sin};  // the mask's tensors are inputs of the recomputed block
      for (const auto& part : mask.parts()) inputs.push_back(part);
      x = nn::recompute(
          [layer](const std::vector<at::Tensor>& in) {
            return layer->forward(in[0], nn::Rotary{in[1], in[2]}, nn::AttentionMask::from_parts(in, 3), nullptr);
          },
          inputs, nn::block_parameters(*layer));
    } else {
      x = layer->forward(x, rotary, mask, caches ? &(*caches)[i].self_attn : nullptr);
    }
    if (hidden_states) hidden_states->push_back(x);
  }
  x = in_stream_type(norm(x), x);
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after the final norm
  return x;
}

double LlamaImpl::flops_per_token(int64_t seq_len, int64_t) const {
  double flops = 2.0 * static_cast<double>(config.hidden_size * config.vocab_size);  // the LM head
  for (const auto& p : layers->named_parameters()) {
    if (p.value().dim() == 2) flops += 2.0 * static_cast<double>(p.value().numel());
  }
  for (size_t i = 0; i < layers->size(); ++i) {  // each attention's own count (a window's keys)
    flops += layers->ptr<LlamaLayerImpl>(i)->self_attn->kernel().flops_per_token(seq_len);
  }
  return flops;
}

std::vector<HfTensor> LlamaImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = body_prefix("model.");
  t.push_back({b + "embed_tokens.weight", embed_tokens->weight});
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<LlamaLayerImpl>(i);
    const std::string p = b + "layers." + std::to_string(i) + ".";
    add_linear(t, p + "self_attn.q_proj", layer->self_attn->q);
    add_linear(t, p + "self_attn.k_proj", layer->self_attn->k);
    add_linear(t, p + "self_attn.v_proj", layer->self_attn->v);
    add_linear(t, p + "self_attn.o_proj", layer->self_attn->out);
    add_linear(t, p + "mlp.gate_proj", layer->mlp->gate_proj);
    add_linear(t, p + "mlp.up_proj", layer->mlp->up_proj);
    add_linear(t, p + "mlp.down_proj", layer->mlp->down_proj);
    add_norm(t, p + "input_layernorm", layer->input_layernorm);
    add_norm(t, p + "post_attention_layernorm", layer->post_attention_layernorm);
  }
  add_norm(t, b + "norm", norm);
  add_head_tensors(t);
  return t;
}

Family llama_family() { return mistral_family("llama"); }

Family mistral_family(const std::string& model_type) {
  // The tokenizer: SentencePiece BPE with byte fallback, <unk>=0 <s>=1 </s>=2 (Mistral's too).
  Family f = decoder_family<LlamaImpl, LlamaConfig>(
      model_type, architectures_of(model_type),
      [model_type](const Json& j, const std::string& file) { return LlamaConfig::from_json(j, file, model_type); }, "llama");
  f.summary = model_type == "llama"
                  ? "Llama (Touvron et al. 2023): a decoder with RMSNorm, rotary positions and SwiGLU"
                  : "Mistral (Jiang et al. 2023): Llama's decoder with sliding-window attention";
  f.positions_key = "";  // rotary positions have no end: max_position_embeddings bounds nothing,
  f.context_key = "max_position_embeddings";  // but is the default perplexity window
  return f;
}

}  // namespace lmkit::models
