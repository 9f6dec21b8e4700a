#include "lmkit/models/transformer.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>

#include "lmkit/models/attention_config.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

const ConfigTable<TransformerConfig>& TransformerConfig::table() {
  using C = TransformerConfig;
  static const ConfigTable<C> table = [] {
    ConfigField<C> src = fields::number("src_vocab_size", &C::src_vocab_size, int64_t{1});
    src.read = [](ConfigReader& r, C& c) {  // vocab_size: one joint vocabulary, before either side's own
      int64_t vocab = 0;
      if (r.get("vocab_size", vocab, int64_t{1})) c.src_vocab_size = c.tgt_vocab_size = vocab;
      r.get("src_vocab_size", c.src_vocab_size, int64_t{1});
    };
    std::vector<ConfigField<C>> rows = {src,
                           fields::number("tgt_vocab_size", &C::tgt_vocab_size, int64_t{1}),
                           fields::number("d_model", &C::d_model, int64_t{1}),
                           fields::number("encoder_layers", &C::encoder_layers, int64_t{0}),
                           fields::number("decoder_layers", &C::decoder_layers, int64_t{1}),
                           fields::number("num_heads", &C::num_heads, int64_t{1}),
                           fields::number("d_ff", &C::d_ff, int64_t{1}),
                           fields::number("dropout", &C::dropout, 0.0, 1.0),
                           fields::number("attention_dropout", &C::attention_dropout, 0.0, 1.0),
                           fields::choice("activation", &C::activation, {"relu", "gelu"}),
                           fields::number("max_position_embeddings", &C::max_position_embeddings, int64_t{1}),
                           fields::number("layer_norm_eps", &C::layer_norm_eps, 0.0),
                           fields::flag("share_embeddings", &C::share_embeddings),
                           fields::flag("tie_word_embeddings", &C::tie_word_embeddings),
                           fields::number("label_smoothing", &C::label_smoothing, 0.0, 1.0),
                           fields::number("pad_token_id", &C::pad_token_id, int64_t{0}),
                           fields::number("bos_token_id", &C::bos_token_id, int64_t{0}),
                           fields::number("eos_token_id", &C::eos_token_id, int64_t{0}),
                           fields::number("decoder_start_token_id", &C::decoder_start_token_id, int64_t{0}),
                           fields::written<C>("is_encoder_decoder", true)};
    for (auto& row : attention_config_fields(&C::attention, &C::attention_fields)) rows.push_back(std::move(row));
    return ConfigTable<C>(rows);
  }();
  return table;
}

TransformerConfig TransformerConfig::from_json(const Json& j, const std::string& file) {
  TransformerConfig c;
  read_hf_config(table(), j, file, c);
  if (c.share_embeddings && c.src_vocab_size != c.tgt_vocab_size) {
    throw InputError(file + ": share_embeddings needs src_vocab_size == tgt_vocab_size");
  }
  if (c.d_model % c.num_heads != 0) throw InputError(file + ": d_model is not divisible by num_heads");
  check_family_attention(c.attention, /*causal=*/true, file);
  // Padding is a row of both embeddings; the other ids are the decoder's (targets, generation).
  check_config_token_id(file, "pad_token_id", c.pad_token_id, c.src_vocab_size, "src_vocab_size");
  check_config_token_ids(j, file, c.tgt_vocab_size,
                         {{"pad_token_id", c.pad_token_id}, {"bos_token_id", c.bos_token_id},
                          {"eos_token_id", c.eos_token_id}, {"decoder_start_token_id", c.decoder_start_token_id}},
                         "tgt_vocab_size");
  return c;
}

Json TransformerConfig::to_json() const {
  return write_hf_config(table(), "transformer", *this);
}

TransformerImpl::TransformerImpl(TransformerConfig config_) : config(std::move(config_)) {
  const auto& c = config;
  auto embedding = [&](int64_t v) {
    return torch::nn::Embedding(torch::nn::EmbeddingOptions(v, c.d_model).padding_idx(c.pad_token_id));
  };
  src_embed = register_module("src_embed", embedding(c.src_vocab_size));
  tgt_embed = c.share_embeddings ? src_embed : register_module("tgt_embed", embedding(c.tgt_vocab_size));
  positions = register_module("positions", nn::SinusoidalPositions(c.max_position_embeddings, c.d_model));
  auto layer = [&](bool cross, int64_t i) {
    return nn::TransformerLayer(nn::TransformerLayerOptions(c.d_model, c.num_heads, c.d_ff)
                                    .activation(nn::parse_activation(c.activation))
                                    .norm_eps(c.layer_norm_eps)
                                    .pre_norm(false)
                                    .dropout(c.dropout)
                                    .attention_dropout(c.attention_dropout)
                                    .cross_attention(cross)
                                    .causal(cross)  // decoder layers: causal self-attention
                                    .attention(c.attention)
                                    .attention_fields(complete_attention_fields(c.attention, c.attention_fields))
                                    .layer(i)
                                    .max_length(c.max_position_embeddings));
  };
  encoder_layers = register_module("encoder_layers", torch::nn::ModuleList());
  decoder_layers = register_module("decoder_layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.encoder_layers; ++i) encoder_layers->push_back(layer(false, i));
  for (int64_t i = 0; i < c.decoder_layers; ++i) decoder_layers->push_back(layer(true, i));
  if (!c.tie_word_embeddings) {
    out_proj = register_module("out_proj",
                               torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.tgt_vocab_size).bias(false)));
  }
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void TransformerImpl::reset_parameters() {
  // Embeddings N(0, d^-1/2) so that the sqrt(d) scale gives unit variance; Xavier for projections.
  at::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    const std::string& name = p.key();
    if (name.find("norm.weight") != std::string::npos) p.value().fill_(1);
    else if (name.find("_embed.") != std::string::npos) p.value().normal_(0, 1.0 / std::sqrt(static_cast<double>(config.d_model)));
    else if (p.value().dim() == 2) torch::nn::init::xavier_uniform_(p.value());
    else p.value().zero_();
  }
  src_embed->weight[config.pad_token_id].zero_();
  tgt_embed->weight[config.pad_token_id].zero_();
}

at::Tensor TransformerImpl::embed(torch::nn::Embedding& table, const at::Tensor& ids, int64_t offset) {
  // §3.4: embeddings multiplied by sqrt(d_model); §3.5: plus sinusoidal positions; §5.4: dropout.
  at::Tensor x = table(ids) * std::sqrt(static_cast<double>(config.d_model)) + positions(ids.size(1), offset);
  return is_training() && config.dropout > 0 ? nn::dropout(x, config.dropout, true) : x;  // (B, T, D)
}

at::Tensor TransformerImpl::encode(const at::Tensor& input_ids, const at::Tensor& attention_mask) {
  at::Tensor x = embed(src_embed, input_ids, 0);
  const int64_t s = input_ids.size(1);
  at::Tensor bias = nn::attention_bias(attention_mask, false, s, s, x.scalar_type(), x.device());
  return run_layers(encoder_layers, x, bias);  // (B, S, D)
}

at::Tensor TransformerImpl::decode(const at::Tensor& decoder_input_ids, const at::Tensor& decoder_attention_mask,
                                   const at::Tensor& memory, const at::Tensor& memory_mask,
                                   std::vector<nn::LayerCache>* caches) {
  const int64_t t = decoder_input_ids.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  at::Tensor x = embed(tgt_embed, decoder_input_ids, past);
  at::Tensor self_bias =
      nn::attention_bias(decoder_attention_mask, true, t, past + t, x.scalar_type(), x.device(), true);
  at::Tensor cross_bias = nn::attention_bias(memory_mask, false, t, memory.size(1), x.scalar_type(), x.device());
  return run_layers(decoder_layers, x, self_bias, memory, cross_bias, caches);  // (B, T, D)
}

at::Tensor TransformerImpl::lm_logits(const at::Tensor& hidden) {
  return nn::linear(hidden, out_proj ? out_proj->weight : tgt_embed->weight);  // (..., V_tgt)
}

Output TransformerImpl::forward(const Batch& batch) {
  Output out;
  at::Tensor memory = encode(batch.input_ids, batch.attention_mask);
  out.encoder_last_hidden_state = memory;
  at::Tensor dec_ids = batch.decoder_input_ids.defined()
                           ? batch.decoder_input_ids
                           : shift_right(batch.labels, config.decoder_start_token_id, config.pad_token_id);
  out.last_hidden_state = decode(dec_ids, batch.decoder_attention_mask, memory, batch.attention_mask);
  vocabulary_head(out, batch.labels, full_logits, {}, out_proj ? out_proj->weight : tgt_embed->weight, {},
                  config.label_smoothing);
  return out;
}

GenerationSpec TransformerImpl::generation_spec() const {
  return {true, config.decoder_start_token_id, config.eos_token_id, config.tgt_vocab_size, config.max_position_embeddings};
}

std::unique_ptr<DecodingSession> TransformerImpl::start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                        bool use_cache) {
  return encoder_decoder_session(*this, input_ids, attention_mask, use_cache);
}

void TransformerImpl::check_batch(const Batch& b) const {
  check_plain_inputs(b, config.src_vocab_size, architecture());
  check_decoder_inputs(b, config.tgt_vocab_size, "the Transformer");
}

std::vector<HfTensor> TransformerImpl::hf_tensors() {
  // No HF class exists: the checkpoint holds lmkit's own names (buffers excluded).
  std::vector<HfTensor> t;
  for (auto& p : named_parameters()) t.push_back({p.key(), p.value()});
  return t;
}

Family transformer_family() {
  Family f;
  f.model_type = "transformer";
  f.summary = "the Transformer (Vaswani et al. 2017): the original encoder-decoder, sinusoidal positions";
  f.architectures = {TransformerImpl::kArchitecture};
  f.objectives = {{"seq2seq", TransformerImpl::kArchitecture}};
  f.heads = {{kTextToTextHead, TransformerImpl::kArchitecture}};
  f.tokenizer_family = "t5";
  f.positions_key = "max_position_embeddings";
  f.encoder_decoder = true;
  f.create = [](const Json& config, const std::string& file, const std::string&) -> std::shared_ptr<Model> {
    return std::make_shared<TransformerImpl>(TransformerConfig::from_json(config, file));
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t eos) {
    // One joint vocabulary; decoding starts from the pad id, as T5 does.
    config.erase("src_vocab_size"), config.erase("tgt_vocab_size");
    config["vocab_size"] = vocab_size;
    config["pad_token_id"] = pad, config["eos_token_id"] = eos;
    config["bos_token_id"] = config["decoder_start_token_id"] = pad;
  };
  return f;
}

}  // namespace lmkit::models
