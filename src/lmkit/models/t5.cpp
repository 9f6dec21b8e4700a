#include "lmkit/models/t5.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

namespace {

// The one table of the classes this family builds.
const ArchitectureTable<T5Head>& t5_architectures() {
  static const ArchitectureTable<T5Head> table(
      {{"T5ForConditionalGeneration", T5Head::kConditionalGeneration, kTextToTextHead},
       {"T5Model", T5Head::kNone, ""},
       {"T5EncoderForSequenceClassification", T5Head::kEncoderClassification, kClassificationHead},
       {"T5ForTokenClassification", T5Head::kTokenClassification, kTokenClassificationHead}});
  return table;
}

// dense_act_fn and is_gated_act: derived by HF from feed_forward_proj; must agree with it if present.
ConfigField<T5Config> gated_act_field() {
  auto act = [](const T5Config& c) { return c.feed_forward_proj == "relu" ? "relu" : "gelu_new"; };
  return {"dense_act_fn", "as feed_forward_proj: relu | gelu_new",
          [act](ConfigReader& r, T5Config& c) {
            std::string read = act(c);
            bool gated = c.feed_forward_proj != "relu";
            r.get("dense_act_fn", read);
            r.get("is_gated_act", gated);
            if (read != act(c) || gated != (c.feed_forward_proj != "relu")) {
              throw InputError(r.file() + ": dense_act_fn/is_gated_act disagree with feed_forward_proj '" + c.feed_forward_proj + "'");
            }
          },
          [act](const T5Config& c) { return Json(act(c)); }, {},
          [act](Json& j, const T5Config& c) {
            j["dense_act_fn"] = act(c);
            j["is_gated_act"] = c.feed_forward_proj != "relu";
          },
          {}};
}

}  // namespace

const ConfigTable<T5Config>& T5Config::table() {
  using C = T5Config;
  static const ConfigTable<C> table = [] {
    // null (or absent): as many as the encoder; read after num_layers.
    ConfigField<C> decoder_layers = fields::number("num_decoder_layers", &C::num_decoder_layers, int64_t{0});
    decoder_layers.read = [](ConfigReader& r, C& c) {
      c.num_decoder_layers = c.num_layers;
      r.get_nullable("num_decoder_layers", c.num_decoder_layers, c.num_layers, int64_t{0});
    };
    // transformers < 5 derived it from tie_word_embeddings (read before it); written where it differs.
    ConfigField<C> scale = fields::flag("scale_decoder_outputs", &C::scale_decoder_outputs);
    scale.read = [](ConfigReader& r, C& c) {
      c.scale_decoder_outputs = c.tie_word_embeddings;
      r.get("scale_decoder_outputs", c.scale_decoder_outputs);
    };
    scale.written = [](const C& c) { return c.scale_decoder_outputs != c.tie_word_embeddings; };
    auto classifies = [](const C& c) { return c.head == T5Head::kEncoderClassification || c.head == T5Head::kTokenClassification; };
    return ConfigTable<C>(
        {fields::number("vocab_size", &C::vocab_size, int64_t{1}),
         fields::number("d_model", &C::d_model, int64_t{1}),
         fields::number("d_kv", &C::d_kv, int64_t{1}),
         fields::number("d_ff", &C::d_ff, int64_t{1}),
         fields::number("num_layers", &C::num_layers, int64_t{0}),
         decoder_layers,
         fields::number("num_heads", &C::num_heads, int64_t{1}),
         fields::number("relative_attention_num_buckets", &C::relative_attention_num_buckets, int64_t{2}),
         fields::number("relative_attention_max_distance", &C::relative_attention_max_distance, int64_t{1}),
         fields::number("dropout_rate", &C::dropout_rate, 0.0, 1.0),
         fields::nullable("classifier_dropout", &C::classifier_dropout, 0.0, 0.0, 1.0),
         fields::number("layer_norm_epsilon", &C::layer_norm_epsilon, 0.0),
         fields::number("initializer_factor", &C::initializer_factor, 0.0),
         fields::choice("feed_forward_proj", &C::feed_forward_proj, {"relu", "gated-gelu"}),
         gated_act_field(),
         fields::flag("tie_word_embeddings", &C::tie_word_embeddings),
         scale,
         fields::number("pad_token_id", &C::pad_token_id, int64_t{0}),
         fields::number("eos_token_id", &C::eos_token_id, int64_t{0}),
         fields::number("decoder_start_token_id", &C::decoder_start_token_id, int64_t{0}),
         fields::written<C>("is_encoder_decoder", true),
         labels_field(&C::num_labels).when(classifies)},
        {"bos_token_id", "n_positions", "output_past", "gradient_checkpointing"});
  }();
  return table;
}

T5Config T5Config::from_json(const Json& j, const std::string& file) {
  T5Config c;
  read_hf_config(table(), j, file, c);
  // Defaults (pad 0, eos 1, decoder start 0) need a vocabulary of two ids.
  check_config_token_ids(j, file, c.vocab_size,
                         {{"pad_token_id", c.pad_token_id}, {"eos_token_id", c.eos_token_id},
                          {"decoder_start_token_id", c.decoder_start_token_id}});
  // relative_position_bucket(): the exact buckets are half of a direction's (the encoder
  // halves them again per direction), and the logarithmic ones span from there to
  // max_distance. Fewer than 4, or a max_distance within the exact range, divides by
  // log(1) or log(0) and turns into bucket ids outside the embedding.
  if (c.relative_attention_num_buckets < 4) {
    throw InputError(file + ": key 'relative_attention_num_buckets' = " + std::to_string(c.relative_attention_num_buckets) +
                     " is too few (at least 4: exact and logarithmic buckets in each direction)");
  }
  if (c.relative_attention_max_distance <= c.relative_attention_num_buckets / 2) {
    throw InputError(file + ": key 'relative_attention_max_distance' = " + std::to_string(c.relative_attention_max_distance) +
                     " must exceed the exact buckets' range, relative_attention_num_buckets / 2 = " +
                     std::to_string(c.relative_attention_num_buckets / 2));
  }
  return c;
}

Json T5Config::to_json() const {
  return write_hf_config(table(), "t5", *this);
}

T5StackImpl::T5StackImpl(const T5Config& c, bool decoder_) : decoder(decoder_), dropout_rate(c.dropout_rate) {
  const int64_t n = decoder ? c.num_decoder_layers : c.num_layers;
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < n; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(c.d_model, c.num_heads, c.d_ff)
                                               .head_dim(c.d_kv)
                                               .activation(nn::parse_activation(c.feed_forward_proj))
                                               .norm(nn::NormType::kRmsNorm)
                                               .norm_eps(c.layer_norm_epsilon)
                                               .pre_norm(true)
                                               .bias(false)
                                               .scale_scores(false)
                                               .dropout(c.dropout_rate)
                                               .attention_dropout(c.dropout_rate)
                                               .ffn_dropout(c.dropout_rate)
                                               .cross_attention(decoder)));
  }
  relative_bias = register_module("relative_bias", nn::RelativePositionBias(nn::RelativePositionBiasOptions(c.num_heads)
                                                                                .bidirectional(!decoder)
                                                                                .num_buckets(c.relative_attention_num_buckets)
                                                                                .max_distance(c.relative_attention_max_distance)));
  final_norm = register_module("final_norm", nn::Norm(nn::NormOptions(c.d_model)
                                                          .type(nn::NormType::kRmsNorm)
                                                          .eps(c.layer_norm_epsilon)));
}

at::Tensor T5StackImpl::forward(at::Tensor x, const at::Tensor& mask, const at::Tensor& memory,
                                const at::Tensor& memory_mask, std::vector<nn::LayerCache>* caches,
                                std::vector<at::Tensor>* hidden_states) {
  const int64_t t = x.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  const double p = is_training() ? dropout_rate : 0.0;
  if (hidden_states) hidden_states->push_back(x);
  if (p > 0) x = nn::dropout(x, p, true);
  // Block 0 computes the position bias; HF adds the mask to it and every block reuses the sum.
  at::Tensor bias = relative_bias(t, past + t);  // (1, H, T, past + T)
  at::Tensor mask_bias = nn::attention_bias(mask, decoder, t, past + t, x.scalar_type(), x.device());
  if (mask_bias.defined()) bias = bias + mask_bias;
  at::Tensor cross_bias;
  if (decoder) cross_bias = nn::attention_bias(memory_mask, false, t, memory.size(1), x.scalar_type(), x.device());
  x = run_layers(layers, x, bias, memory, cross_bias, caches, hidden_states, &final_norm);
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after the final norm
  return p > 0 ? nn::dropout(x, p, true) : x;
}

T5Impl::T5Impl(T5Config config_) : config(std::move(config_)) {
  const auto& c = config;
  shared = register_module("shared", torch::nn::Embedding(c.vocab_size, c.d_model));
  encoder = register_module("encoder", T5Stack(c, false));
  const bool encoder_only = c.head == T5Head::kEncoderClassification || c.head == T5Head::kTokenClassification;
  if (!encoder_only) decoder = register_module("decoder", T5Stack(c, true));
  if (c.head == T5Head::kConditionalGeneration && !c.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab_size).bias(false)));
  }
  if (c.head == T5Head::kEncoderClassification) {
    classifier_dense = register_module("classifier_dense", torch::nn::Linear(c.d_model, c.d_model));
    classifier_out = register_module("classifier_out", torch::nn::Linear(c.d_model, c.num_labels));
  }
  if (c.head == T5Head::kTokenClassification) {
    token_classifier = register_module("token_classifier", TokenClassifier(c.d_model, c.num_labels, c.classifier_dropout));
  }
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void T5Impl::reset_parameters() {
  // HF T5PreTrainedModel._init_weights (Mesh TensorFlow's scheme).
  at::NoGradGuard no_grad;
  const double f = config.initializer_factor, d = static_cast<double>(config.d_model);
  const int64_t inner = config.num_heads * config.d_kv;
  shared->weight.normal_(0, f);
  if (lm_head) lm_head->weight.normal_(0, f);
  for (T5Stack* stack : {&encoder, &decoder}) {
    if (!*stack) continue;
    (*stack)->relative_bias->embedding->weight.normal_(0, f / std::sqrt(d));
    for (size_t i = 0; i < (*stack)->layers->size(); ++i) {
      auto layer = (*stack)->layers->ptr<nn::TransformerLayerImpl>(i);
      for (auto* attn : {layer->self_attn.get(), layer->cross_attn ? layer->cross_attn.get() : nullptr}) {
        if (!attn) continue;
        at::Tensor qw = attn->qkv ? attn->qkv->weight.slice(0, 0, inner) : attn->q->weight;
        at::Tensor kvw = attn->qkv ? attn->qkv->weight.slice(0, inner) : attn->kv->weight;
        qw.normal_(0, f / std::sqrt(d * config.d_kv));
        kvw.normal_(0, f / std::sqrt(d));
        attn->out->weight.normal_(0, f / std::sqrt(static_cast<double>(inner)));
      }
      layer->ffn->in->weight.normal_(0, f / std::sqrt(d));
      layer->ffn->out->weight.normal_(0, f / std::sqrt(static_cast<double>(config.d_ff)));
    }
  }
  if (classifier_dense) {
    classifier_dense->weight.normal_(0, f / std::sqrt(d));
    classifier_dense->bias.zero_();
    classifier_out->weight.normal_(0, f / std::sqrt(d));
    classifier_out->bias.zero_();
  }
  reset_norms(*this);
  if (token_classifier) {  // HF: T5ForTokenClassification's classifier ~ N(0, factor), zero bias
    token_classifier->linear->weight.normal_(0, f);
    token_classifier->linear->bias.zero_();
  }
}

std::string T5Impl::architecture() const { return t5_architectures().name(config.head); }

at::Tensor T5Impl::encode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                          std::vector<at::Tensor>* hidden_states) {
  return encoder(shared(input_ids), attention_mask, at::Tensor(), at::Tensor(), nullptr, hidden_states);  // (B, S, D)
}

at::Tensor T5Impl::decode(const at::Tensor& decoder_input_ids, const at::Tensor& decoder_attention_mask,
                          const at::Tensor& memory, const at::Tensor& memory_mask, std::vector<nn::LayerCache>* caches,
                          std::vector<at::Tensor>* hidden_states) {
  return decoder(shared(decoder_input_ids), decoder_attention_mask, memory, memory_mask, caches, hidden_states);
}

at::Tensor T5Impl::lm_input(const at::Tensor& hidden) const {
  // v1.0 (Mesh TF) rescales the decoder output by d_model^-0.5 before its tied head.
  return config.scale_decoder_outputs ? hidden * (1.0 / std::sqrt(static_cast<double>(config.d_model))) : hidden;
}

at::Tensor T5Impl::lm_logits(const at::Tensor& hidden) {
  return nn::linear(lm_input(hidden), lm_head ? lm_head->weight : shared->weight, {});  // (..., V)
}

Output T5Impl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* enc_hs = output_hidden_states ? &out.encoder_hidden_states : nullptr;
  at::Tensor memory = encode(batch.input_ids, batch.attention_mask, enc_hs);  // (B, S, D)
  if (token_classifier) {
    out.last_hidden_state = memory;
    token_classifier->apply(out, memory, batch.labels);
    return out;
  }
  if (config.head == T5Head::kEncoderClassification) {
    out.last_hidden_state = memory;
    at::Tensor mask = batch.attention_mask.defined() ? batch.attention_mask.to(memory.scalar_type()).unsqueeze(-1)
                                                     : at::ones({memory.size(0), memory.size(1), 1}, memory.options());
    at::Tensor pooled = (memory * mask).sum(1) / mask.sum(1).clamp_min(1);  // (B, D) mean over real tokens
    const double p = is_training() ? config.classifier_dropout : 0.0;
    at::Tensor h = at::tanh(classifier_dense(p > 0 ? nn::dropout(pooled, p, true) : pooled));
    out.logits = classifier_out(p > 0 ? nn::dropout(h, p, true) : h);  // (B, num_labels)
    if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
    return out;
  }
  out.encoder_last_hidden_state = memory;
  at::Tensor dec_ids = batch.decoder_input_ids.defined()
                           ? batch.decoder_input_ids
                           : shift_right(batch.labels, config.decoder_start_token_id, config.pad_token_id);
  std::vector<at::Tensor>* dec_hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = decode(dec_ids, batch.decoder_attention_mask, memory, batch.attention_mask, nullptr, dec_hs);
  if (config.head == T5Head::kConditionalGeneration) {
    vocabulary_head(out, batch.labels, full_logits, [this](const at::Tensor& h) { return lm_input(h); },
                    lm_head ? lm_head->weight : shared->weight, {});
  }
  return out;
}

GenerationSpec T5Impl::generation_spec() const {
  return {true, config.decoder_start_token_id, config.eos_token_id, config.vocab_size};
}

std::unique_ptr<DecodingSession> T5Impl::start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                        bool use_cache) {
  if (config.head != T5Head::kConditionalGeneration) return Model::start_decoding({}, {}, use_cache);
  return encoder_decoder_session(*this, input_ids, attention_mask, use_cache);
}

void T5Impl::check_batch(const Batch& b) const {
  check_plain_inputs(b, config.vocab_size, architecture());
  if (config.head == T5Head::kEncoderClassification) {
    check_row_labels(b.labels, b.input_ids.size(0), config.num_labels, "labels");
    return;
  }
  if (token_classifier) {
    check_unused(b.decoder_input_ids, "decoder_input_ids", architecture());
    check_token_labels(b, config.num_labels);
    return;
  }
  check_decoder_inputs(b, config.vocab_size, "T5");
}

std::vector<HfTensor> T5Impl::hf_tensors() {
  std::vector<HfTensor> t;
  t.push_back({"shared.weight", shared->weight});
  const bool gated = config.feed_forward_proj != "relu";
  for (T5Stack* stack : {&encoder, &decoder}) {
    if (!*stack) continue;
    const std::string s = (*stack)->decoder ? "decoder." : "encoder.";
    t.push_back({s + "block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                 (*stack)->relative_bias->embedding->weight});
    for (size_t i = 0; i < (*stack)->layers->size(); ++i) {
      auto layer = (*stack)->layers->ptr<nn::TransformerLayerImpl>(i);
      const std::string p = s + "block." + std::to_string(i) + ".layer.";
      const std::string sa = p + "0.SelfAttention.";
      add_fused_linear(t, {sa + "q", sa + "k", sa + "v"}, layer->self_attn->qkv);
      add_linear(t, sa + "o", layer->self_attn->out);
      add_norm(t, p + "0.layer_norm", layer->self_attn_norm);
      std::string ff = p + "1.";
      if ((*stack)->decoder) {
        const std::string ca = p + "1.EncDecAttention.";
        add_linear(t, ca + "q", layer->cross_attn->q);
        add_fused_linear(t, {ca + "k", ca + "v"}, layer->cross_attn->kv);
        add_linear(t, ca + "o", layer->cross_attn->out);
        add_norm(t, p + "1.layer_norm", layer->cross_attn_norm);
        ff = p + "2.";
      }
      if (gated) {
        add_fused_linear(t, {ff + "DenseReluDense.wi_0", ff + "DenseReluDense.wi_1"}, layer->ffn->in);
      } else {
        add_linear(t, ff + "DenseReluDense.wi", layer->ffn->in);
      }
      add_linear(t, ff + "DenseReluDense.wo", layer->ffn->out);
      add_norm(t, ff + "layer_norm", layer->ffn_norm);
    }
    add_norm(t, s + "final_layer_norm", (*stack)->final_norm);
  }
  if (lm_head) t.push_back({"lm_head.weight", lm_head->weight});
  if (classifier_dense) {
    add_linear(t, "classification_head.dense", classifier_dense);
    add_linear(t, "classification_head.out_proj", classifier_out);
  }
  if (token_classifier) {
    // HF's T5ForTokenClassification: a T5EncoderModel under "transformer.", then the head.
    for (auto& tensor : t) tensor.name = "transformer." + tensor.name;
    token_classifier->add_hf_tensors(t);
  }
  return t;
}

bool T5Impl::hf_ignorable(const std::string& name) const {
  // Aliases of shared.weight that HF drops on save; a tied lm_head copy.
  return name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight" ||
         name == "transformer.encoder.embed_tokens.weight" ||
         (name == "lm_head.weight" && !lm_head);
}

Family t5_family() {
  Family f;
  f.model_type = "t5";
  f.summary = "T5 (Raffel et al. 2020): an encoder-decoder with bucketed relative position biases and RMSNorm";
  f.architectures = t5_architectures().names();
  f.heads = t5_architectures().heads();
  f.objectives = {{"span", "T5ForConditionalGeneration"}};
  f.tokenizer_family = "t5";
  f.metrics = {"span"};
  f.encoder_decoder = true;
  f.create = family_creator<T5Impl, T5Config>(t5_architectures(), T5Config::from_json);
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t) { config["vocab_size"] = vocab_size; };
  return f;
}

}  // namespace lmkit::models
