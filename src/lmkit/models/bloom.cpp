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
#include "lmkit/nn/transformer_layer.h"

namespace lmkit::models {

namespace {

// The one table of the classes this family builds.
const ArchitectureTable<BloomHead>& bloom_architectures() {
  static const ArchitectureTable<BloomHead> table(
      {{"BloomForCausalLM", BloomHead::kLmHead, kTextToTextHead},
       {"BloomModel", BloomHead::kNone, ""},
       {"BloomForSequenceClassification", BloomHead::kSequenceClassification, kClassificationHead},
       {"BloomForTokenClassification", BloomHead::kTokenClassification, kTokenClassificationHead}});
  return table;
}

}  // namespace

BloomConfig BloomConfig::from_json(const Json& j, const std::string& file) {
  BloomConfig c;
  ConfigReader r(j, file);
  ignore_generic_hf_keys(r);
  // Megatron-DeepSpeed's bookkeeping in BigScience's configs, and pretraining_tp /
  // slow_but_exact, which split the same products into slices.
  r.ignore({"id2label", "use_cache", "pretraining_tp", "slow_but_exact", "seq_length", "masked_softmax_fusion",
            "attention_softmax_in_fp32", "bias_dropout_fusion", "skip_bias_add", "skip_bias_add_qkv", "offset_alibi",
            "unk_token_id", "n_inner"});
  r.get("vocab_size", c.vocab_size, int64_t{1});
  if (j.contains("n_embed")) r.get("n_embed", c.hidden_size, int64_t{1});
  else r.get("hidden_size", c.hidden_size, int64_t{1});
  r.get("n_layer", c.n_layer, int64_t{0});
  r.get("n_head", c.n_head, int64_t{1});
  r.get("layer_norm_epsilon", c.layer_norm_epsilon, 0.0);
  r.get("initializer_range", c.initializer_range, 0.0);
  r.get("hidden_dropout", c.hidden_dropout, 0.0, 1.0);
  r.get("attention_dropout", c.attention_dropout, 0.0, 1.0);
  r.get_nullable("classifier_dropout", c.classifier_dropout, -1.0, 0.0, 1.0);
  r.get("tie_word_embeddings", c.tie_word_embeddings);
  r.get_nullable("bos_token_id", c.bos_token_id, int64_t{-1}, int64_t{0});
  r.get_nullable("eos_token_id", c.eos_token_id, int64_t{-1}, int64_t{0});
  r.get_nullable("pad_token_id", c.pad_token_id, int64_t{-1}, int64_t{0});
  bool post_layernorm = false;  // a variant lmkit does not implement must be off, not ignored
  r.get("apply_residual_connection_post_layernorm", post_layernorm);
  if (post_layernorm) throw InputError(file + ": key 'apply_residual_connection_post_layernorm' = true is not supported");
  c.num_labels = read_num_labels(r, c.num_labels);
  r.finish();
  // HF's defaults (1 and 2, BLOOM's <s> and </s>) are no ids of a one- or two-id vocabulary.
  if (!j.contains("bos_token_id") && c.bos_token_id >= c.vocab_size) c.bos_token_id = -1;
  if (!j.contains("eos_token_id") && c.eos_token_id >= c.vocab_size) c.eos_token_id = -1;
  check_config_token_ids(j, file, c.vocab_size,
                         {{"bos_token_id", c.bos_token_id}, {"eos_token_id", c.eos_token_id}, {"pad_token_id", c.pad_token_id}});
  if (c.hidden_size % c.n_head != 0) {
    throw InputError(file + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by n_head " +
                     std::to_string(c.n_head));
  }
  return c;
}

Json BloomConfig::to_json() const {
  auto id = [](int64_t v) { return v < 0 ? Json(nullptr) : Json(v); };
  Json j = {{"model_type", "bloom"},
            {"vocab_size", vocab_size},
            {"hidden_size", hidden_size},
            {"n_layer", n_layer},
            {"n_head", n_head},
            {"layer_norm_epsilon", layer_norm_epsilon},
            {"initializer_range", initializer_range},
            {"hidden_dropout", hidden_dropout},
            {"attention_dropout", attention_dropout},
            {"apply_residual_connection_post_layernorm", false},
            {"tie_word_embeddings", tie_word_embeddings},
            {"bos_token_id", id(bos_token_id)},
            {"eos_token_id", id(eos_token_id)},
            {"pad_token_id", id(pad_token_id)}};
  if (head == BloomHead::kSequenceClassification || head == BloomHead::kTokenClassification) write_num_labels(j, num_labels);
  if (head == BloomHead::kTokenClassification && classifier_dropout >= 0) j["classifier_dropout"] = classifier_dropout;
  return j;
}

at::Tensor alibi_slopes(int64_t heads) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const int64_t n = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
  // HF: base = 2^(−2^−(log2(n) − 3)), in float32; slopes = base^[1..n].
  auto powers_of = [&](double base, int64_t first, int64_t end, int64_t step) {
    return at::pow(at::full({}, base, f32), at::arange(first, end, step, at::kInt));
  };
  at::Tensor slopes = powers_of(std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3))), 1, 1 + n, 1);
  if (n != heads) {
    const int64_t extra = std::min(n, heads - n);
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * n)) - 3)));
    slopes = at::cat({slopes, powers_of(base, 1, 1 + 2 * extra, 2)});
  }
  return slopes;
}

at::Tensor alibi_bias(const at::Tensor& slopes, const at::Tensor& key_padding_mask, int64_t k_len, at::ScalarType dtype,
                      at::Device device) {
  at::Tensor positions;  // (B|1, Tk)
  if (key_padding_mask.defined()) {
    const at::Tensor m = key_padding_mask.to(device).to(at::kLong);
    positions = (m.cumsum(-1) - 1) * m;
  } else {
    positions = at::arange(k_len, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(0);
  }
  const at::Tensor s = slopes.to(device).view({1, -1, 1, 1});
  return (s * positions.unsqueeze(1).unsqueeze(1).to(at::kFloat)).to(dtype);  // (B|1, H, 1, Tk)
}

BloomImpl::BloomImpl(BloomConfig config_) : config(std::move(config_)) {
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
  if (c.head == BloomHead::kLmHead && !c.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(d, c.vocab_size).bias(false)));
  }
  if (c.head == BloomHead::kSequenceClassification) {
    score = register_module("score", torch::nn::Linear(torch::nn::LinearOptions(d, c.num_labels).bias(false)));
  }
  if (c.head == BloomHead::kTokenClassification) {
    const double p = c.classifier_dropout >= 0 ? c.classifier_dropout : c.hidden_dropout;
    token_classifier = register_module("token_classifier", TokenClassifier(d, c.num_labels, p));
  }
  reset_parameters();
}

void BloomImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);  // HF's _init_weights: N(0, initializer_range), zero biases
  for (auto& p : named_parameters()) {
    const bool norm = p.key().find("norm") != std::string::npos || p.key().rfind("ln_f.", 0) == 0;
    if (norm && p.key().find(".weight") != std::string::npos) p.value().fill_(1);
    if (norm && p.key().find(".bias") != std::string::npos) p.value().zero_();
  }
}

std::string BloomImpl::architecture() const { return bloom_architectures().name(config.head); }

at::Tensor BloomImpl::decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                             std::vector<nn::LayerCache>* caches, std::vector<at::Tensor>* hidden_states) {
  const int64_t t = input_ids.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  at::Tensor x = word_embeddings_layernorm(word_embeddings(input_ids));  // (B, T, D); no positions
  if (hidden_states) hidden_states->push_back(x);
  // attention_mask, when given, covers past + new positions (B, past + T).
  const at::Tensor alibi = alibi_bias(alibi_slopes(config.n_head), attention_mask, past + t, x.scalar_type(), x.device());
  const at::Tensor mask = nn::attention_bias(attention_mask, true, t, past + t, x.scalar_type(), x.device());
  x = run_layers(layers, x, alibi + mask, {}, {}, caches, hidden_states);  // bias (B|1, H, T, past + T)
  x = ln_f(x);
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after ln_f
  return x;
}

at::Tensor BloomImpl::lm_logits(const at::Tensor& hidden) {
  return nn::linear(hidden, lm_head ? lm_head->weight : word_embeddings->weight);  // (..., V)
}

Output BloomImpl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = decode(batch.input_ids, batch.attention_mask, nullptr, hs);  // (B, T, D)
  const bool lm = config.head == BloomHead::kLmHead;
  apply_decoder_head(out, batch, lm ? (lm_head ? lm_head->weight : word_embeddings->weight) : at::Tensor(), full_logits, score, token_classifier);
  return out;
}

double BloomImpl::flops_per_token(int64_t seq_len, int64_t) const {
  return layer_flops_per_token(layers, seq_len) + 2.0 * static_cast<double>(config.hidden_size * config.vocab_size);
}

GenerationSpec BloomImpl::generation_spec() const {
  return {false, config.bos_token_id, config.eos_token_id, config.vocab_size, 0};  // ALiBi: no position limit
}

std::unique_ptr<DecodingSession> BloomImpl::start_decoding(const at::Tensor&, const at::Tensor&, bool use_cache) {
  if (config.head != BloomHead::kLmHead) return Model::start_decoding({}, {}, use_cache);
  return decoder_only_session(*this, use_cache);
}

void BloomImpl::check_batch(const Batch& b) const {
  check_decoder_batch(b, architecture(), config.vocab_size, static_cast<bool>(token_classifier),
                      config.head == BloomHead::kSequenceClassification, config.num_labels);
}

std::vector<HfTensor> BloomImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = config.head == BloomHead::kNone ? "" : "transformer.";  // HF's BloomModel has no prefix
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
  if (lm_head) t.push_back({"lm_head.weight", lm_head->weight});
  if (score) t.push_back({"score.weight", score->weight});
  if (token_classifier) token_classifier->add_hf_tensors(t);
  return t;
}

bool BloomImpl::hf_ignorable(const std::string& name) const {
  return name == "lm_head.weight" && !lm_head;  // tied to word_embeddings
}

Family bloom_family() {
  Family f;
  f.model_type = "bloom";
  f.architectures = bloom_architectures().names();
  f.heads = bloom_architectures().heads();
  f.objectives = {{"clm", "BloomForCausalLM"}};
  f.tokenizer_family = "bloom";  // <unk>=0 <s>=1 </s>=2 <pad>=3, nothing added around a text
  f.positions_key = "";          // ALiBi has no end, and BloomConfig names no length: give --context
  f.metrics = {"perplexity"};
  f.create = [](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<Model> {
    BloomConfig c = BloomConfig::from_json(config, file);
    c.head = bloom_architectures().head(arch);
    return std::make_shared<BloomImpl>(c);
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t eos) {
    config["vocab_size"] = vocab_size;
    config["eos_token_id"] = eos;
    if (pad >= 0) config["pad_token_id"] = pad;
  };
  return f;
}

}  // namespace lmkit::models
