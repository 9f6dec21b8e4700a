#include "lmkit/models/gpt.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/models/architectures.h"
#include "lmkit/models/attention_config.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/decoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

namespace {

const ArchitectureTable<DecoderHead>& gpt_architectures() {
  static const auto table = decoder_architectures("GPT2", "LMHeadModel");
  return table;
}

}  // namespace

const ConfigTable<GptConfig>& GptConfig::table() {
  using C = GptConfig;
  static const ConfigTable<C> table = [] {
    std::vector<ConfigField<C>> f = {
        fields::number("vocab_size", &C::vocab_size, int64_t{1}),
        fields::number("n_positions", &C::n_positions, int64_t{1}),
        fields::number("n_embd", &C::n_embd, int64_t{1}),
        fields::number("n_layer", &C::n_layer, int64_t{0}),
        fields::number("n_head", &C::n_head, int64_t{1}),
        fields::nullable("n_inner", &C::n_inner, int64_t{0}, int64_t{1}),
        fields::choice("activation_function", &C::activation_function, {"gelu_new", "gelu", "relu", "gelu_pytorch_tanh"}),
        fields::number("resid_pdrop", &C::resid_pdrop, 0.0, 1.0),
        fields::number("embd_pdrop", &C::embd_pdrop, 0.0, 1.0),
        fields::number("attn_pdrop", &C::attn_pdrop, 0.0, 1.0),
        fields::number("layer_norm_epsilon", &C::layer_norm_epsilon, 0.0),
        fields::number("initializer_range", &C::initializer_range, 0.0),
        // Variants lmkit does not implement must be off, not silently ignored.
        fields::fixed<C>("scale_attn_weights", true),
        fields::fixed<C>("scale_attn_by_inverse_layer_idx", false, /*write=*/false),
        fields::fixed<C>("reorder_and_upcast_attn", false, false)};
    for (auto& field : attention_config_fields(&C::attention, &C::attention_fields)) f.push_back(field);
    f.push_back(fields::choice("position_embedding_type", &C::position_embedding_type, {"absolute", "none"})
                    .when([](const C& c) { return c.position_embedding_type != "absolute"; }));
    for (auto& field : decoder_head_fields<C>(0.1)) f.push_back(field);
    return ConfigTable<C>(f, {"decoder_start_token_id", "summary_activation", "summary_first_dropout",
                              "summary_proj_to_labels", "summary_type", "summary_use_proj", "n_ctx"});
  }();
  return table;
}

GptConfig GptConfig::from_json(const Json& j, const std::string& file) {
  GptConfig c;
  read_hf_config(table(), j, file, c);
  settle_decoder_token_ids(j, file, c.vocab_size, c.bos_token_id, c.eos_token_id, c.pad_token_id);
  if (c.n_embd % c.n_head != 0) {
    throw InputError(file + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
  }
  check_family_attention(c.attention, /*causal=*/true, file);
  return c;
}

Json GptConfig::to_json() const {
  return write_hf_config(table(), "gpt2", *this);
}

GptImpl::GptImpl(GptConfig config_)
    : DecoderModel(gpt_architectures(), config_.head,
                   {false, config_.bos_token_id, config_.eos_token_id, config_.vocab_size, config_.n_positions}),
      config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.n_embd;
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, d));
  if (c.position_embedding_type == "absolute") wpe = register_module("wpe", nn::LearnedPositions(c.n_positions, d));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(d, c.n_head, c.inner())
                                               .activation(nn::parse_activation(c.activation_function))
                                               .norm_eps(c.layer_norm_epsilon)
                                               .pre_norm(true)
                                               .dropout(c.resid_pdrop)
                                               .attention_dropout(c.attn_pdrop)
                                               .causal(true)
                                               .attention(c.attention)
                                               .attention_fields(complete_attention_fields(c.attention, c.attention_fields))
                                               .layer(i)
                                               .max_length(c.n_positions)));
  }
  ln_f = register_module("ln_f", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_epsilon)));
  build_head({d, c.vocab_size, c.num_labels, c.tie_word_embeddings, c.classifier_dropout});
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void GptImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);
  if (wpe) wpe->weight.normal_(0, config.initializer_range);
  reset_norms(*this);
  // Radford et al. 2019: residual projections scaled by 1/sqrt(2 · n_layer).
  const double std_resid = config.initializer_range / std::sqrt(2.0 * std::max<int64_t>(1, config.n_layer));
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    layer->self_attn->out->weight.normal_(0, std_resid);
    layer->ffn->out->weight.normal_(0, std_resid);
  }
}

at::Tensor GptImpl::decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                           std::vector<nn::LayerCache>* caches, std::vector<at::Tensor>* hidden_states,
                           const Packing& packing) {
  const int64_t t = input_ids.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  // HF forward(): position_ids = arange(past, past + T), whatever the padding; packed documents restart theirs.
  at::Tensor x = wte(input_ids);  // (B, T, D)
  if (wpe) x = x + (packing.position_ids.defined() ? wpe->at(packing.position_ids) : wpe(t, past));
  if (is_training() && config.embd_pdrop > 0) x = nn::dropout(x, config.embd_pdrop, true);
  if (hidden_states) hidden_states->push_back(x);
  // attention_mask, when given, covers past + new positions (B, past + T).
  // Without padding, the layers mask future keys in the kernel (flash attention on a GPU).
  const nn::AttentionMask mask =
      packing.document_ids.defined()
          ? nn::document_mask(packing.document_ids, attention_mask, true, x.scalar_type(), x.device())
          : nn::AttentionMask(nn::attention_bias(attention_mask, true, t, past + t, x.scalar_type(), x.device(), true));
  x = run_layers(layers, x, mask, {}, {}, caches, hidden_states, &ln_f);  // then ln_f: (B, T, D)
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after ln_f
  return x;
}

std::vector<HfTensor> GptImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = body_prefix("transformer.");
  t.push_back({b + "wte.weight", wte->weight});
  if (wpe) t.push_back({b + "wpe.weight", wpe->weight});
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = b + "h." + std::to_string(i) + ".";
    // Conv1D: weight stored (in, out); c_attn's columns are [q | k | v], matching qkv's rows.
    add_linear(t, p + "attn.c_attn", layer->self_attn->qkv, /*transpose=*/true);
    add_linear(t, p + "attn.c_proj", layer->self_attn->out, true);
    add_norm(t, p + "ln_1", layer->self_attn_norm);
    add_linear(t, p + "mlp.c_fc", layer->ffn->in, true);
    add_linear(t, p + "mlp.c_proj", layer->ffn->out, true);
    add_norm(t, p + "ln_2", layer->ffn_norm);
    add_kernel_tensors(t, p + "attn.", *layer->self_attn);  // Shaw et al.'s tables, a plugin's (lmkit's names)
  }
  add_norm(t, b + "ln_f", ln_f);
  add_head_tensors(t);
  return t;
}

bool GptImpl::hf_ignorable(const std::string& name) const {
  // Tied lm_head, and the causal-mask buffers of older checkpoints.
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return DecoderModel::hf_ignorable(name) || ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

Family gpt_family() {
  Family f = decoder_family<GptImpl, GptConfig>("gpt2", gpt_architectures(), GptConfig::from_json, "gpt2");
  f.summary = "GPT-2 (Radford et al. 2019): a pre-norm Transformer decoder, learned positions, tied head";
  f.positions_key = "n_positions";
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t eos) {
    config["vocab_size"] = vocab_size;
    config["bos_token_id"] = config["eos_token_id"] = eos;  // GPT-2's <|endoftext|> is both
  };
  return f;
}

}  // namespace lmkit::models
