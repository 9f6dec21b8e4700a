#include "electra_model.h"

#include "lmkit/models/encoder_heads.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/feed_forward.h"

namespace electra {

namespace {

using lmkit::models::ArchitectureTable;
using lmkit::models::HfTensor;

const ArchitectureTable<ElectraHead>& electra_architectures() {
  static const ArchitectureTable<ElectraHead> table(
      {{"ElectraForPreTraining", ElectraHead::kPreTraining, ""},
       {"ElectraModel", ElectraHead::kNone, ""},
       {"ElectraForMaskedLM", ElectraHead::kMaskedLm, ""},
       {"ElectraForSequenceClassification", ElectraHead::kSequenceClassification, lmkit::models::kClassificationHead},
       {"ElectraForTokenClassification", ElectraHead::kTokenClassification, lmkit::models::kTokenClassificationHead}});
  return table;
}

// ElectraConfig's keys that BertConfig has not; the multiple-choice head's summary_* are not built here.
const char* const kElectraOnly[] = {"embedding_size", "summary_type", "summary_use_proj", "summary_activation",
                                    "summary_last_dropout", "summary_first_dropout", "is_decoder", "add_cross_attention",
                                    "generator_size", "rtd_weight"};

double number_in(const Json& j, const char* key, double fallback, double lo, double hi, const std::string& file) {
  if (!j.contains(key)) return fallback;
  lmkit::check_input(j[key].is_number() && j[key].get<double>() >= lo && j[key].get<double>() <= hi,
                     file + ": key '" + key + "' must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return j[key].get<double>();
}

int64_t scaled(int64_t size, double fraction) { return std::max<int64_t>(1, static_cast<int64_t>(std::llround(size * fraction))); }


}  // namespace

ElectraConfig ElectraConfig::from_json(const Json& j, const std::string& file) {
  lmkit::check_input(j.is_object(), file + ": a model config is a JSON object");
  ElectraConfig c;
  // ElectraConfig's defaults (ELECTRA-Small's discriminator) under BERT's reader.
  c.bert.hidden_size = 256, c.bert.num_attention_heads = 4, c.bert.intermediate_size = 1024;
  Json bert_keys = j;
  for (const char* key : kElectraOnly) bert_keys.erase(key);
  c.bert = lmkit::models::BertConfig::from_json(bert_keys, file, c.bert);
  if (j.contains("embedding_size")) {
    lmkit::check_input(j["embedding_size"].is_number_integer() && j["embedding_size"].get<int64_t>() > 0,
                       file + ": key 'embedding_size' must be a positive integer");
    c.embedding_size = j["embedding_size"].get<int64_t>();
  }
  if (j.contains("is_decoder") && j["is_decoder"] == true) throw lmkit::InputError(file + ": key 'is_decoder' = true is not supported");
  c.generator_size = number_in(j, "generator_size", 0.0, 0.0, 1.0, file);
  c.rtd_weight = number_in(j, "rtd_weight", 50.0, 0.0, 1e6, file);
  if (c.generator_size > 0) {
    const ElectraConfig g = c.generator();
    lmkit::check_input(g.bert.hidden_size % g.bert.num_attention_heads == 0,
                       file + ": generator_size " + std::to_string(c.generator_size) + " gives a generator of hidden size " +
                           std::to_string(g.bert.hidden_size) + " and " + std::to_string(g.bert.num_attention_heads) +
                           " heads, which do not divide");
  }
  return c;
}

ElectraConfig ElectraConfig::generator() const {
  ElectraConfig g = *this;
  g.bert.hidden_size = scaled(bert.hidden_size, generator_size);
  g.bert.intermediate_size = scaled(bert.intermediate_size, generator_size);
  g.bert.num_attention_heads = scaled(bert.num_attention_heads, generator_size);
  g.generator_size = 0;
  g.head = ElectraHead::kMaskedLm;
  return g;
}

Json ElectraConfig::to_json() const {
  Json j = bert.to_json();
  j["model_type"] = "electra";
  j["embedding_size"] = embedding_size;
  if (generator_size > 0) j["generator_size"] = generator_size, j["rtd_weight"] = rtd_weight;
  if (head == ElectraHead::kSequenceClassification || head == ElectraHead::kTokenClassification) {
    lmkit::models::write_num_labels(j, bert.num_labels);
  }
  return j;
}

ElectraImpl::ElectraImpl(ElectraConfig config_, ElectraImpl* embedder) : config(std::move(config_)) {
  const auto& c = config.bert;
  const int64_t e = config.embedding_size, h = c.hidden_size;
  const auto norm = [&](int64_t d) { return lmkit::nn::Norm(lmkit::nn::NormOptions(d).eps(c.layer_norm_eps)); };
  if (embedder) {  // shared, not registered: their parameters are the embedder's alone
    owns_embeddings_ = false;
    word_embeddings = embedder->word_embeddings, position_embeddings = embedder->position_embeddings;
    token_type_embeddings = embedder->token_type_embeddings, embeddings_norm = embedder->embeddings_norm;
  } else {
    word_embeddings = register_module(
        "word_embeddings", torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size, e).padding_idx(c.pad_token_id)));
    position_embeddings = register_module("position_embeddings", lmkit::nn::LearnedPositions(c.max_position_embeddings, e));
    token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, e));
    embeddings_norm = register_module("embeddings_norm", norm(e));
  }
  if (e != h) embeddings_project = register_module("embeddings_project", torch::nn::Linear(e, h));
  layers = register_module("layers", lmkit::models::bert_encoder_layers(c));
  switch (config.head) {
    case ElectraHead::kPreTraining:
      discriminator_dense = register_module("discriminator_dense", torch::nn::Linear(h, h));
      discriminator_prediction = register_module("discriminator_prediction", torch::nn::Linear(h, 1));
      if (config.generator_size > 0) generator = register_module("generator", std::make_shared<ElectraImpl>(config.generator(), this));
      break;
    case ElectraHead::kMaskedLm:
      generator_dense = register_module("generator_dense", torch::nn::Linear(h, e));
      generator_norm = register_module("generator_norm", norm(e));
      generator_bias = register_parameter("generator_bias", at::zeros({c.vocab_size}));
      break;
    case ElectraHead::kSequenceClassification:
      classifier_dense = register_module("classifier_dense", torch::nn::Linear(h, h));
      classifier_out = register_module("classifier_out", torch::nn::Linear(h, c.num_labels));
      break;
    case ElectraHead::kTokenClassification:
      token_classifier = register_module("token_classifier",
                                         lmkit::models::TokenClassifier(h, c.num_labels, lmkit::models::head_dropout(c)));
      break;
    case ElectraHead::kNone: break;
  }
  if (lmkit::models::initialise_weights()) reset_parameters();  // not when a checkpoint's weights follow
}

void ElectraImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  lmkit::models::init_normal(*this, config.bert.initializer_range);  // HF's _init_weights
  if (owns_embeddings_) {
    position_embeddings->weight.normal_(0, config.bert.initializer_range);
    word_embeddings->weight[config.bert.pad_token_id].zero_();
  }
  lmkit::models::reset_norms(*this);
  if (generator_bias.defined()) generator_bias.zero_();
  if (generator) generator->reset_parameters();
}

std::string ElectraImpl::architecture() const { return electra_architectures().name(config.head); }

at::Tensor ElectraImpl::encode(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& token_type_ids,
                               std::vector<at::Tensor>* hidden_states) {
  const int64_t t = input_ids.size(1);
  const double p = is_training() ? config.bert.hidden_dropout_prob : 0.0;
  const at::Tensor types = token_type_ids.defined() ? token_type_ids : at::zeros_like(input_ids);
  at::Tensor x = word_embeddings(input_ids) + position_embeddings(t) + token_type_embeddings(types);  // (B, T, E)
  x = embeddings_norm(x);
  if (p > 0) x = lmkit::nn::dropout(x, p, true);
  if (embeddings_project) x = embeddings_project(x);  // (B, T, H)
  if (hidden_states) hidden_states->push_back(x);
  const at::Tensor bias = lmkit::nn::attention_bias(attention_mask, false, t, t, x.scalar_type(), x.device());
  return lmkit::models::run_layers(layers, x, bias, {}, {}, nullptr, hidden_states);
}

at::Tensor ElectraImpl::generator_logits(const at::Tensor& hidden) {
  const at::Tensor h = generator_norm(lmkit::nn::activate(generator_dense(hidden), lmkit::nn::Activation::kGelu));
  return at::linear(h, word_embeddings->weight, generator_bias);  // (..., V)
}

// HF's ElectraForPreTraining: a logit per token; the loss is binary cross-entropy over
// the real tokens (attention mask 1), here also leaving out labels of -100.
void ElectraImpl::discriminate(const lmkit::Batch& batch, lmkit::Output& out) {
  const auto act = lmkit::nn::parse_activation(config.bert.hidden_act);
  out.logits = discriminator_prediction(lmkit::nn::activate(discriminator_dense(out.last_hidden_state), act)).squeeze(-1);
  if (!batch.labels.defined()) return;
  at::Tensor active = batch.labels.ne(-100);
  if (batch.attention_mask.defined()) active = active.logical_and(batch.attention_mask.eq(1));
  const at::Tensor logits = out.logits.masked_select(active), labels = batch.labels.masked_select(active);
  out.loss = at::binary_cross_entropy_with_logits(logits, labels.to(logits.scalar_type()));
  if (!is_training()) {
    out.metrics.push_back({"rtd_accuracy", logits.gt(0).eq(labels.eq(1)).sum(), static_cast<double>(labels.numel())});
  }
}

void ElectraImpl::generate_logits(const lmkit::Batch& batch, lmkit::Output& out) {
  if (full_logits || !batch.labels.defined()) out.logits = generator_logits(out.last_hidden_state);  // (B, T, V)
  if (!batch.labels.defined()) return;
  if (out.logits.defined()) {
    out.loss = lmkit::models::cross_entropy(out.logits, batch.labels);
  } else {  // training: only the masked positions go through the vocabulary
    auto [rows, targets] = lmkit::models::select_targets(out.last_hidden_state, batch.labels);
    out.loss = lmkit::models::cross_entropy(generator_logits(rows), targets);
  }
}

// HF's ElectraClassificationHead: [CLS] -> dropout -> dense -> GELU -> dropout -> out_proj.
void ElectraImpl::classify(const lmkit::Batch& batch, lmkit::Output& out) {
  const double p = is_training() ? lmkit::models::head_dropout(config.bert) : 0.0;
  auto drop = [&](const at::Tensor& x) { return p > 0 ? lmkit::nn::dropout(x, p, true) : x; };
  const at::Tensor cls = drop(out.last_hidden_state.select(1, 0));
  const at::Tensor h = drop(lmkit::nn::activate(classifier_dense(cls), lmkit::nn::Activation::kGelu));
  out.logits = classifier_out(h);  // (B, num_labels)
  if (batch.labels.defined()) out.loss = lmkit::models::classification_loss(out.logits, batch.labels);
}

// Clark et al.'s replaced token detection. The generator (an MLM) predicts the masked
// positions; each is filled with a token sampled from its distribution (Gumbel-max on its
// logits, no gradient back to it); the discriminator labels every real token replaced (1)
// or original (0): a sample equal to the original is original. Loss mlm + λ·rtd.
void ElectraImpl::replaced_token_detection(const lmkit::Batch& batch, lmkit::Output& out) {
  const at::Tensor masked = batch.labels.ne(-100);  // (B, T)
  const at::Tensor targets = batch.labels.masked_select(masked);
  const at::Tensor hidden = generator->encode(batch.input_ids, batch.attention_mask, batch.token_type_ids);
  const at::Tensor rows = hidden.index({masked});  // (N, Hg)
  const at::Tensor logits = generator->generator_logits(rows);  // (N, V)
  const at::Tensor mlm = lmkit::models::cross_entropy(logits, targets);
  at::Tensor ids = batch.input_ids.clone(), rtd_labels = at::zeros_like(batch.labels), u;
  {
    at::NoGradGuard no_grad;
    u = at::rand_like(logits, logits.options().dtype(at::kFloat)).clamp_(1e-9, 1.0 - 1e-7);
    const at::Tensor sampled = (logits.detach().to(at::kFloat) - (-u.log()).log()).argmax(-1);  // Gumbel-max
    ids.masked_scatter_(masked, sampled);
    rtd_labels.masked_scatter_(masked, sampled.ne(targets).to(rtd_labels.scalar_type()));
  }
  out.last_hidden_state = encode(ids, batch.attention_mask, batch.token_type_ids);
  const auto act = lmkit::nn::parse_activation(config.bert.hidden_act);
  out.logits = discriminator_prediction(lmkit::nn::activate(discriminator_dense(out.last_hidden_state), act)).squeeze(-1);
  const at::Tensor active = batch.attention_mask.defined() ? batch.attention_mask.eq(1) : at::ones_like(masked);
  const at::Tensor d_logits = out.logits.masked_select(active), d_labels = rtd_labels.masked_select(active);
  const at::Tensor rtd = at::binary_cross_entropy_with_logits(d_logits, d_labels.to(d_logits.scalar_type()));
  // The draws and what they made, for lmkit-forward (the sampling parity test reads them).
  out.named.emplace_back("gumbel_uniform", u);
  out.named.emplace_back("replaced_input_ids", ids);
  out.named.emplace_back("rtd_labels", rtd_labels);
  out.terms.push_back({"mlm", mlm, masked.sum()});
  out.terms.push_back({"rtd", rtd * config.rtd_weight, active.sum()});
  out.loss = mlm + rtd * config.rtd_weight;
  if (!is_training()) {
    out.metrics.push_back({"rtd_accuracy", d_logits.gt(0).eq(d_labels.eq(1)).sum(), static_cast<double>(d_labels.numel())});
    out.metrics.push_back({"replaced_fraction", rtd_labels.masked_select(masked).sum(), static_cast<double>(targets.numel())});
    out.metrics.push_back({"generator_accuracy", logits.argmax(-1).eq(targets).sum(), static_cast<double>(targets.numel())});
  }
}

lmkit::Output ElectraImpl::forward(const lmkit::Batch& batch) {
  lmkit::Output out;
  if (generator && batch.labels.defined()) {
    replaced_token_detection(batch, out);
    return out;
  }
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = encode(batch.input_ids, batch.attention_mask, batch.token_type_ids, hs);  // (B, T, H)
  if (discriminator_dense) discriminate(batch, out);
  if (generator_dense) generate_logits(batch, out);
  if (classifier_dense) classify(batch, out);
  if (token_classifier) token_classifier->apply(out, out.last_hidden_state, batch.labels);
  return out;
}

std::vector<std::string> ElectraImpl::metric_names() const {
  if (generator) return {"rtd_accuracy", "replaced_fraction", "generator_accuracy"};
  return config.head == ElectraHead::kPreTraining ? std::vector<std::string>{"rtd_accuracy"} : std::vector<std::string>{};
}

std::vector<std::pair<std::string, int64_t>> ElectraImpl::loss_targets(const lmkit::Batch& b) const {
  if (!generator) return Model::loss_targets(b);
  if (!b.input_ids.defined()) return {{"mlm", 0}, {"rtd", 0}};
  const int64_t real = b.attention_mask.defined() ? b.attention_mask.eq(1).sum().item<int64_t>() : b.input_ids.numel();
  return {{"mlm", b.labels.defined() ? b.labels.ne(-100).sum().item<int64_t>() : 0}, {"rtd", real}};
}

std::vector<std::pair<std::string, lmkit::models::Model*>> ElectraImpl::companions() {
  if (!generator) return {};
  return {{"generator", generator.get()}};
}

void ElectraImpl::check_batch(const lmkit::Batch& b) const {
  using namespace lmkit::models;
  const auto& c = config.bert;
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture());
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture());
  check_extra_inputs(b, {}, architecture());
  check_token_matrix(b.input_ids, c.vocab_size, "input_ids");
  check_token_ids(b.token_type_ids, c.type_vocab_size, "token_type_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
  check_same_shape(b.token_type_ids, b.input_ids, "token_type_ids", "input_ids");
  if (generator) check_input_labels(b, false, c.num_labels, c.vocab_size);  // the electra objective's MLM labels
  else if (config.head == ElectraHead::kPreTraining) check_token_labels(b, 2);  // replaced (1) or original (0)
  else if (token_classifier) check_token_labels(b, c.num_labels);
  else check_input_labels(b, config.head == ElectraHead::kSequenceClassification, c.num_labels, c.vocab_size);
}

std::vector<HfTensor> ElectraImpl::hf_tensors() {
  using lmkit::models::add_linear;
  using lmkit::models::add_norm;
  std::vector<HfTensor> t;
  const std::string b = config.head == ElectraHead::kNone ? "" : "electra.";  // HF's ElectraModel has no prefix
  t.push_back({b + "embeddings.word_embeddings.weight", word_embeddings->weight});
  t.push_back({b + "embeddings.position_embeddings.weight", position_embeddings->weight});
  t.push_back({b + "embeddings.token_type_embeddings.weight", token_type_embeddings->weight});
  add_norm(t, b + "embeddings.LayerNorm", embeddings_norm);
  if (embeddings_project) add_linear(t, b + "embeddings_project", embeddings_project);
  lmkit::models::add_bert_encoder_tensors(t, b, layers);
  if (discriminator_dense) {
    add_linear(t, "discriminator_predictions.dense", discriminator_dense);
    add_linear(t, "discriminator_predictions.dense_prediction", discriminator_prediction);
  }
  if (generator_dense) {
    add_linear(t, "generator_predictions.dense", generator_dense);
    add_norm(t, "generator_predictions.LayerNorm", generator_norm);
    t.push_back({"generator_lm_head.bias", generator_bias});
  }
  if (classifier_dense) {
    add_linear(t, "classifier.dense", classifier_dense);
    add_linear(t, "classifier.out_proj", classifier_out);
  }
  if (token_classifier) token_classifier->add_hf_tensors(t);
  return t;
}

bool ElectraImpl::hf_ignorable(const std::string& name) const {
  // The generator's head tied to the word embeddings, and the position_ids buffer of old checkpoints.
  return name == "generator_lm_head.weight" || name == "electra.embeddings.position_ids" || name == "embeddings.position_ids";
}

double ElectraImpl::flops_per_token(int64_t seq_len, int64_t) const {
  const double h = static_cast<double>(config.bert.hidden_size), e = static_cast<double>(config.embedding_size);
  double flops = lmkit::models::layer_flops_per_token(layers, seq_len) + (embeddings_project ? 2.0 * e * h : 0.0);
  if (discriminator_dense) flops += 2.0 * (h * h + h);
  // The generator's head runs on the ~15% of positions that carry a label.
  if (generator_dense) flops += 0.15 * 2.0 * (h * e + e * static_cast<double>(config.bert.vocab_size));
  if (generator) flops += generator->flops_per_token(seq_len, 0);  // the objective runs both models
  return flops;
}

lmkit::models::Family electra_family() {
  lmkit::models::Family f;
  f.model_type = "electra";
  f.summary = "ELECTRA (Clark et al. 2020): a discriminator trained on a small generator's replaced tokens";
  f.architectures = electra_architectures().names();
  f.heads = electra_architectures().heads();
  // Replaced token detection (the plugin's objective; the config needs generator_size), or the
  // generator alone as a masked LM with lmkit's mlm objective.
  f.objectives = {{"electra", "ElectraForPreTraining"}, {"mlm", "ElectraForMaskedLM"}};
  f.tokenizer_family = "bert";  // ELECTRA uses BERT's WordPiece vocabulary and [CLS] A [SEP] B [SEP]
  f.positions_key = "max_position_embeddings";
  f.metrics = {"pseudo-perplexity"};
  f.create = [](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<lmkit::models::Model> {
    ElectraConfig c = ElectraConfig::from_json(config, file);
    c.head = electra_architectures().head(arch);
    return std::make_shared<ElectraImpl>(c);
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t) {
    config["vocab_size"] = vocab_size;
    if (pad >= 0) config["pad_token_id"] = pad;
  };
  return f;
}

}  // namespace electra
