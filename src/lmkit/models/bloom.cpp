#include "lmkit/models/bloom.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/decoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/linear.h"
#include "lmkit/nn/position.h"
#include "lmkit/nn/transformer_layer.h"

namespace lmkit::models {

namespace {

const ArchitectureTable<DecoderHead>& bloom_architectures() {
  static const auto table = decoder_architectures("Bloom", "ForCausalLM");
  return table;
}

}  // namespace

const ConfigTable<BloomConfig>& BloomConfig::table() {
  using C = BloomConfig;
  static const ConfigTable<C> table = [] {
    ConfigField<C> hidden = fields::number("hidden_size", &C::hidden_size, int64_t{1});
    hidden.read = [](ConfigReader& r, C& c) {  // HF reads n_embed as hidden_size
      if (!r.get("n_embed", c.hidden_size, int64_t{1})) r.get("hidden_size", c.hidden_size, int64_t{1});
    };
    std::vector<ConfigField<C>> f = {
        fields::number("vocab_size", &C::vocab_size, int64_t{1}),
        hidden,
        fields::number("n_layer", &C::n_layer, int64_t{0}),
        fields::number("n_head", &C::n_head, int64_t{1}),
        fields::number("layer_norm_epsilon", &C::layer_norm_epsilon, 0.0),
        fields::number("initializer_range", &C::initializer_range, 0.0),
        fields::number("hidden_dropout", &C::hidden_dropout, 0.0, 1.0),
        fields::number("attention_dropout", &C::attention_dropout, 0.0, 1.0),
        fields::fixed<C>("apply_residual_connection_post_layernorm", false)};
    for (auto& field : decoder_head_fields<C>(-1.0)) f.push_back(field);
    // Megatron-DeepSpeed's bookkeeping in BigScience's configs, and pretraining_tp /
    // slow_but_exact, which split the same products into slices.
    return ConfigTable<C>(f, {"use_cache", "pretraining_tp", "slow_but_exact", "seq_length", "masked_softmax_fusion",
                              "attention_softmax_in_fp32", "bias_dropout_fusion", "skip_bias_add", "skip_bias_add_qkv",
                              "offset_alibi", "unk_token_id", "n_inner"});
  }();
  return table;
}

BloomConfig BloomConfig::from_json(const Json& j, const std::string& file) {
  BloomConfig c;
  read_hf_config(table(), j, file, c);
  settle_decoder_token_ids(j, file, c.vocab_size, c.bos_token_id, c.eos_token_id, c.pad_token_id);
  if (c.hidden_size % c.n_head != 0) {
    throw InputError(file + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by n_head " +
                     std::to_string(c.n_head));
  }
  return c;
}

Json BloomConfig::to_json() const {
  return write_hf_config(table(), "bloom", *this);
}

BloomImpl::BloomImpl(BloomConfig config_)  // ALiBi: no position limit
    : DecoderModel(bloom_architectures(), config_.head, {false, config_.bos_token_id, config_.eos_token_id, config_.vocab_size, 0}),
      config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  const auto layer_norm = nn::NormOptions(d).eps(c.layer_norm_epsilon);
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, d));
  word_embeddings_layernorm = register_module("word_embeddings_layernorm", nn::Norm(layer_norm));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(d, c.n_head, 4 * d)
                                               .activation(nn::Activation::kGeluTanh)
                                               .norm_eps(c.layer_norm_epsilon)
                                               .pre_norm(true)
                                               .dropout(c.hidden_dropout)
                                               .attention_dropout(c.attention_dropout)
                                               .causal(true)
                                               .qkv_per_head(true)));
  }
  ln_f = register_module("ln_f", nn::Norm(layer_norm));
  const double p = c.classifier_dropout >= 0 ? c.classifier_dropout : c.hidden_dropout;  // HF's fallback
  build_head({d, c.vocab_size, c.num_labels, c.tie_word_embeddings, p});
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void BloomImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);  // HF's _init_weights: N(0, initializer_range), zero biases
  reset_norms(*this);
}

at::Tensor BloomImpl::decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                             std::vector<nn::LayerCache>* caches, std::vector<at::Tensor>* hidden_states,
                             const Packing& packing) {
  const int64_t t = input_ids.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  at::Tensor x = word_embeddings_layernorm(word_embeddings(input_ids));  // (B, T, D); no positions
  if (hidden_states) hidden_states->push_back(x);
  // attention_mask, when given, covers past + new positions (B, past + T).
  const at::Tensor alibi = nn::alibi_bias(nn::alibi_slopes(config.n_head), attention_mask, past + t, x.scalar_type(), x.device());
  // Packed documents need no restarted positions: ALiBi's bias is relative, and the mask keeps each in its own.
  const at::Tensor mask = packing.document_ids.defined()
                              ? nn::document_attention_bias(packing.document_ids, attention_mask, true, x.scalar_type(), x.device())
                              : nn::attention_bias(attention_mask, true, t, past + t, x.scalar_type(), x.device());
  x = run_layers(layers, x, alibi + mask, {}, {}, caches, hidden_states, &ln_f);  // bias (B|1, H, T, past + T); then ln_f
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after ln_f
  return x;
}

double BloomImpl::flops_per_token(int64_t seq_len, int64_t) const {
  return layer_flops_per_token(layers, seq_len) + 2.0 * static_cast<double>(config.hidden_size * config.vocab_size);
}

std::vector<HfTensor> BloomImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = body_prefix("transformer.");
  t.push_back({b + "word_embeddings.weight", word_embeddings->weight});
  add_norm(t, b + "word_embeddings_layernorm", word_embeddings_layernorm);
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = b + "h." + std::to_string(i) + ".";
    add_norm(t, p + "input_layernorm", layer->self_attn_norm);
    add_linear(t, p + "self_attention.query_key_value", layer->self_attn->qkv);  // rows (H, 3, hd), as lmkit's
    add_linear(t, p + "self_attention.dense", layer->self_attn->out);
    add_norm(t, p + "post_attention_layernorm", layer->ffn_norm);
    add_linear(t, p + "mlp.dense_h_to_4h", layer->ffn->in);
    add_linear(t, p + "mlp.dense_4h_to_h", layer->ffn->out);
  }
  add_norm(t, b + "ln_f", ln_f);
  add_head_tensors(t);
  return t;
}

Family bloom_family() {
  // The tokenizer: <unk>=0 <s>=1 </s>=2 <pad>=3, nothing added around a text. ALiBi has no end,
  // and BloomConfig names no length: no positions_key (give --context).
  Family f = decoder_family<BloomImpl, BloomConfig>("bloom", bloom_architectures(), BloomConfig::from_json, "bloom");
  f.summary = "BLOOM (BigScience 2022): a pre-norm decoder with ALiBi position penalties";
  return f;
}

}  // namespace lmkit::models
