#include "lmkit/models/bert.h"

#include <ATen/ATen.h>

#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::models {

namespace {

// The one table of the classes this family builds.
const ArchitectureTable<BertHead>& bert_architectures() {
  static const ArchitectureTable<BertHead> table({{"BertForPreTraining", BertHead::kPreTraining, ""},
                                                  {"BertModel", BertHead::kNone, ""},
                                                  {"BertForMaskedLM", BertHead::kMaskedLm, ""},
                                                  {"BertForSequenceClassification", BertHead::kSequenceClassification,
                                                   kClassificationHead},
                                                  {"BertForSpanPreTraining", BertHead::kSpanPreTraining, ""},
                                                  {"BertForTokenClassification", BertHead::kTokenClassification,
                                                   kTokenClassificationHead}});
  return table;
}

}  // namespace

BertConfig BertConfig::from_json(const Json& j, const std::string& file) { return from_json(j, file, BertConfig()); }

BertConfig BertConfig::from_json(const Json& j, const std::string& file, BertConfig defaults) {
  BertConfig c = std::move(defaults);
  ConfigReader r(j, file);
  ignore_generic_hf_keys(r);
  r.ignore({"bos_token_id", "eos_token_id", "decoder_start_token_id", "tie_word_embeddings", "id2label"});
  r.get("vocab_size", c.vocab_size, int64_t{1});
  r.get("hidden_size", c.hidden_size, int64_t{1});
  r.get("num_hidden_layers", c.num_hidden_layers, int64_t{0});
  r.get("num_attention_heads", c.num_attention_heads, int64_t{1});
  r.get("intermediate_size", c.intermediate_size, int64_t{1});
  r.get_choice("hidden_act", c.hidden_act, {"gelu", "gelu_new", "relu"});
  r.get("hidden_dropout_prob", c.hidden_dropout_prob, 0.0, 1.0);
  r.get("attention_probs_dropout_prob", c.attention_probs_dropout_prob, 0.0, 1.0);
  r.get("max_position_embeddings", c.max_position_embeddings, int64_t{1});
  r.get("type_vocab_size", c.type_vocab_size, int64_t{1});
  r.get("initializer_range", c.initializer_range, 0.0);
  r.get("layer_norm_eps", c.layer_norm_eps, 0.0);
  r.get_nullable("pad_token_id", c.pad_token_id, c.pad_token_id, int64_t{0});
  r.get_nullable("classifier_dropout", c.classifier_dropout, -1.0, 0.0, 1.0);
  r.get("span_boundary_max_targets", c.span_boundary_max_targets, int64_t{1});
  r.get("span_boundary_position_size", c.span_boundary_position_size, int64_t{1});
  std::string position_type = "absolute";
  r.get_choice("position_embedding_type", position_type, {"absolute"});
  c.num_labels = read_num_labels(r, c.num_labels);
  r.finish();
  // The padding row is one of the embedding's (a default pad too: RoBERTa's 1).
  check_config_token_ids(j, file, c.vocab_size, {{"pad_token_id", c.pad_token_id}});
  if (c.hidden_size % c.num_attention_heads != 0) {
    throw InputError(file + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
                     std::to_string(c.num_attention_heads));
  }
  return c;
}

Json BertConfig::to_json() const {
  Json j = {{"model_type", "bert"},
            {"vocab_size", vocab_size},
            {"hidden_size", hidden_size},
            {"num_hidden_layers", num_hidden_layers},
            {"num_attention_heads", num_attention_heads},
            {"intermediate_size", intermediate_size},
            {"hidden_act", hidden_act},
            {"hidden_dropout_prob", hidden_dropout_prob},
            {"attention_probs_dropout_prob", attention_probs_dropout_prob},
            {"max_position_embeddings", max_position_embeddings},
            {"type_vocab_size", type_vocab_size},
            {"initializer_range", initializer_range},
            {"layer_norm_eps", layer_norm_eps},
            {"pad_token_id", pad_token_id},
            {"position_embedding_type", "absolute"}};
  j["classifier_dropout"] = classifier_dropout < 0 ? Json(nullptr) : Json(classifier_dropout);
  if (head == BertHead::kSequenceClassification || head == BertHead::kTokenClassification) write_num_labels(j, num_labels);
  if (head == BertHead::kSpanPreTraining) write_span_boundary_keys(j, *this);
  return j;
}

BertImpl::BertImpl(BertConfig config_) : config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  word_embeddings = register_module(
      "word_embeddings", torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size, d).padding_idx(c.pad_token_id)));
  position_embeddings = register_module("position_embeddings", nn::LearnedPositions(c.max_position_embeddings, d));
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, d));
  embeddings_norm = register_module("embeddings_norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
  layers = register_module("layers", bert_encoder_layers(c));
  const bool span = c.head == BertHead::kSpanPreTraining, tokens = c.head == BertHead::kTokenClassification;
  if (c.head != BertHead::kMaskedLm && !span && !tokens) pooler = register_module("pooler", torch::nn::Linear(d, d));
  if (c.head == BertHead::kPreTraining || c.head == BertHead::kMaskedLm || span) {
    mlm_dense = register_module("mlm_dense", torch::nn::Linear(d, d));
    mlm_norm = register_module("mlm_norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
    mlm_bias = register_parameter("mlm_bias", at::zeros({c.vocab_size}));
  }
  if (c.head == BertHead::kPreTraining) nsp = register_module("nsp", torch::nn::Linear(d, 2));
  if (span) span_boundary = register_module("span_boundary", SpanBoundaryHead(span_boundary_options(c)));
  if (c.head == BertHead::kSequenceClassification) {
    classifier = register_module("classifier", torch::nn::Linear(d, c.num_labels));
  }
  if (tokens) token_classifier = register_module("token_classifier", TokenClassifier(d, c.num_labels, head_dropout(c)));
  reset_parameters();
}

void BertImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);
  position_embeddings->weight.normal_(0, config.initializer_range);
  word_embeddings->weight[config.pad_token_id].zero_();
  reset_norms(*this);
  if (mlm_bias.defined()) mlm_bias.zero_();  // the MLM bias starts at zero
}

std::string BertImpl::architecture() const { return bert_architectures().name(config.head); }

at::Tensor BertImpl::encode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                            const at::Tensor& token_type_ids, std::vector<at::Tensor>* hidden_states) {
  const int64_t t = input_ids.size(1);
  at::Tensor types = token_type_ids.defined() ? token_type_ids : at::zeros_like(input_ids);
  // HF: position_ids = arange(T), whatever the padding.
  at::Tensor x = word_embeddings(input_ids) + position_embeddings(t) + token_type_embeddings(types);  // (B, T, D)
  x = embeddings_norm(x);
  if (is_training() && config.hidden_dropout_prob > 0) x = nn::dropout(x, config.hidden_dropout_prob, true);
  if (hidden_states) hidden_states->push_back(x);
  at::Tensor bias = nn::attention_bias(attention_mask, false, t, t, x.scalar_type(), x.device());  // (B, 1, 1, T)
  return run_layers(layers, x, bias, {}, {}, nullptr, hidden_states);
}

at::Tensor BertImpl::mlm_transform(const at::Tensor& hidden) {
  return mlm_norm(nn::activate(mlm_dense(hidden), nn::parse_activation(config.hidden_act)));  // (..., D)
}

at::Tensor BertImpl::mlm_logits(const at::Tensor& hidden) {
  return at::linear(mlm_transform(hidden), word_embeddings->weight, mlm_bias);  // (..., V)
}

void BertImpl::masked_lm(const Batch& batch, Output& out) {
  if (full_logits || !batch.labels.defined()) out.logits = mlm_logits(out.last_hidden_state);  // (B, T, V)
  if (config.head == BertHead::kPreTraining && out.logits.defined()) out.named.emplace_back("prediction_logits", out.logits);
  if (!batch.labels.defined()) return;
  // Devlin et al.: the loss is on the ~15% chosen positions only; training projects just those.
  add_masked_lm_term(out, batch.labels, [this](const at::Tensor& h) { return mlm_transform(h); },
                     word_embeddings->weight, mlm_bias);
  if (span_boundary) span_boundary->add_term(out, out.last_hidden_state, batch.labels, word_embeddings->weight);
}

// Next-sentence prediction on the pooled [CLS]: a loss term over the rows, and its accuracy.
void BertImpl::next_sentence(const Batch& batch, Output& out) {
  at::Tensor logits = nsp(out.pooler_output);  // (B, 2)
  out.named.emplace_back("seq_relationship_logits", logits);
  const at::Tensor label = batch.field(kNextSentenceLabel);
  if (!label.defined()) return;
  at::Tensor loss = cross_entropy(logits, label);
  out.terms.push_back({"nsp", loss, at::scalar_tensor(label.size(0), label.options())});
  out.loss = out.loss.defined() ? out.loss + loss : loss;
  if (!is_training()) {
    out.metrics.push_back({"nsp_accuracy", logits.argmax(-1).eq(label).sum(), static_cast<double>(label.size(0))});
  }
}

std::vector<std::pair<std::string, int64_t>> BertImpl::loss_targets(const Batch& b) const {
  if (!mlm_dense) return Model::loss_targets(b);
  std::vector<std::pair<std::string, int64_t>> t = {{"mlm", b.labels.defined() ? b.labels.ne(-100).sum().item<int64_t>() : 0}};
  if (config.head == BertHead::kPreTraining) {
    const at::Tensor label = b.field(kNextSentenceLabel);
    t.emplace_back("nsp", label.defined() ? label.size(0) : 0);
  }
  if (span_boundary) t.emplace_back("sbo", count_span_targets(b.labels, config.span_boundary_max_targets));
  return t;
}

double BertImpl::flops_per_token(int64_t seq_len, int64_t) const {
  return bert_encoder_flops_per_token(layers, seq_len, config, static_cast<bool>(mlm_dense), span_boundary);
}

Output BertImpl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = encode(batch.input_ids, batch.attention_mask, batch.token_type_ids, hs);  // (B, T, D)
  if (pooler) out.pooler_output = at::tanh(pooler(out.last_hidden_state.select(1, 0)));              // (B, D)

  if (mlm_dense) masked_lm(batch, out);
  if (config.head == BertHead::kPreTraining) next_sentence(batch, out);
  if (token_classifier) token_classifier->apply(out, out.last_hidden_state, batch.labels);
  if (config.head == BertHead::kSequenceClassification) {
    const double p = head_dropout(config);
    at::Tensor pooled = is_training() && p > 0 ? nn::dropout(out.pooler_output, p, true) : out.pooler_output;
    out.logits = classifier(pooled);  // (B, num_labels)
    if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
  }
  return out;
}

void BertImpl::check_batch(const Batch& b) const {
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture());
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture());
  check_extra_inputs(b, config.head == BertHead::kPreTraining ? std::vector<std::string>{kNextSentenceLabel}
                                                              : std::vector<std::string>{}, architecture());
  check_token_matrix(b.input_ids, config.vocab_size, "input_ids");
  check_token_ids(b.token_type_ids, config.type_vocab_size, "token_type_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
  check_same_shape(b.token_type_ids, b.input_ids, "token_type_ids", "input_ids");
  if (token_classifier) check_token_labels(b, config.num_labels);
  else check_input_labels(b, config.head == BertHead::kSequenceClassification, config.num_labels, config.vocab_size);
  check_row_labels(b.field(kNextSentenceLabel), b.input_ids.size(0), 2, kNextSentenceLabel);
}

std::vector<HfTensor> BertImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = config.head == BertHead::kNone ? "" : "bert.";  // HF's BertModel has no prefix
  t.push_back({b + "embeddings.word_embeddings.weight", word_embeddings->weight});
  t.push_back({b + "embeddings.position_embeddings.weight", position_embeddings->weight});
  t.push_back({b + "embeddings.token_type_embeddings.weight", token_type_embeddings->weight});
  add_norm(t, b + "embeddings.LayerNorm", embeddings_norm);
  add_bert_encoder_tensors(t, b, layers);
  if (pooler) add_linear(t, b + "pooler.dense", pooler);
  if (mlm_dense) {
    t.push_back({"cls.predictions.bias", mlm_bias});
    add_linear(t, "cls.predictions.transform.dense", mlm_dense);
    add_norm(t, "cls.predictions.transform.LayerNorm", mlm_norm);
  }
  if (nsp) add_linear(t, "cls.seq_relationship", nsp);
  if (span_boundary) span_boundary->add_hf_tensors(t, "cls.pair_target_predictions.");
  if (classifier) add_linear(t, "classifier", classifier);
  if (token_classifier) token_classifier->add_hf_tensors(t);
  return t;
}

bool BertImpl::hf_ignorable(const std::string& name) const {
  // Tied duplicates HF drops on save, and the position_ids buffer of old .bin checkpoints.
  return name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias" ||
         name == "bert.embeddings.position_ids" || name == "embeddings.position_ids";
}

torch::nn::ModuleList bert_encoder_layers(const BertConfig& c) {
  torch::nn::ModuleList layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(c.hidden_size, c.num_attention_heads, c.intermediate_size)
                                               .activation(nn::parse_activation(c.hidden_act))
                                               .norm_eps(c.layer_norm_eps)
                                               .pre_norm(false)
                                               .dropout(c.hidden_dropout_prob)
                                               .attention_dropout(c.attention_probs_dropout_prob)));
  }
  return layers;
}

void add_bert_encoder_tensors(std::vector<HfTensor>& t, const std::string& prefix, torch::nn::ModuleList& layers) {
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = prefix + "encoder.layer." + std::to_string(i) + ".";
    add_fused_linear(t, {p + "attention.self.query", p + "attention.self.key", p + "attention.self.value"},
                     layer->self_attn->qkv);
    add_linear(t, p + "attention.output.dense", layer->self_attn->out);
    add_norm(t, p + "attention.output.LayerNorm", layer->self_attn_norm);
    add_linear(t, p + "intermediate.dense", layer->ffn->in);
    add_linear(t, p + "output.dense", layer->ffn->out);
    add_norm(t, p + "output.LayerNorm", layer->ffn_norm);
  }
}

void add_masked_lm_term(Output& out, const at::Tensor& labels, const std::function<at::Tensor(const at::Tensor&)>& transform,
                        const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor mlm;
  if (out.logits.defined()) {
    mlm = cross_entropy(out.logits, labels);
  } else {
    auto [rows, targets] = select_targets(out.last_hidden_state, labels);  // (N, D), (N)
    mlm = linear_cross_entropy(transform(rows), weight, bias, targets);
  }
  out.terms.push_back({"mlm", mlm, labels.ne(-100).sum()});
  out.loss = mlm;
}

double bert_encoder_flops_per_token(const torch::nn::ModuleList& layers, int64_t seq_len, const BertConfig& config,
                                    bool mlm_head, const SpanBoundaryHead& span_boundary) {
  const double d = static_cast<double>(config.hidden_size), v = static_cast<double>(config.vocab_size);
  double flops = layer_flops_per_token(layers, seq_len);
  // The MLM head runs on the ~15% of positions that carry a label (the training path projects only those),
  // and the span boundary head on (nearly) the same positions.
  if (mlm_head) flops += 0.15 * (2 * d * v + 2 * d * d);
  if (span_boundary) flops += 0.15 * span_boundary->flops_per_target();
  return flops;
}

SpanBoundaryOptions span_boundary_options(const BertConfig& c) {
  SpanBoundaryOptions o;
  o.hidden_size = c.hidden_size;
  o.vocab_size = c.vocab_size;
  o.max_targets = c.span_boundary_max_targets;
  o.position_size = c.span_boundary_position_size;
  o.activation = nn::parse_activation(c.hidden_act);
  o.norm_eps = c.layer_norm_eps;
  return o;
}

void reset_norms(torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) {
    if (p.key().find("norm.weight") != std::string::npos) p.value().fill_(1);
    if (p.key().find("norm.bias") != std::string::npos) p.value().zero_();
  }
}

double head_dropout(const BertConfig& c) {
  return c.classifier_dropout >= 0 ? c.classifier_dropout : c.hidden_dropout_prob;
}

void write_span_boundary_keys(Json& j, const BertConfig& c) {
  j["span_boundary_max_targets"] = c.span_boundary_max_targets;
  j["span_boundary_position_size"] = c.span_boundary_position_size;
}

Family bert_family() {
  Family f;
  f.model_type = "bert";
  f.architectures = bert_architectures().names();
  f.heads = bert_architectures().heads();
  f.objectives = {{"mlm+nsp", "BertForPreTraining"}, {"mlm", "BertForMaskedLM"}, {"mlm+sbo", "BertForSpanPreTraining"}};
  f.tokenizer_family = "bert";
  f.positions_key = "max_position_embeddings";
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = [](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<Model> {
    BertConfig c = BertConfig::from_json(config, file);
    c.head = bert_architectures().head(arch);
    return std::make_shared<BertImpl>(c);
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t) { config["vocab_size"] = vocab_size; };
  return f;
}

}  // namespace lmkit::models
