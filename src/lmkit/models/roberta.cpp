#include "lmkit/models/roberta.h"

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
const ArchitectureTable<RobertaHead>& roberta_architectures() {
  static const ArchitectureTable<RobertaHead> table(
      {{"RobertaForMaskedLM", RobertaHead::kMaskedLm, ""},
       {"RobertaModel", RobertaHead::kNone, ""},
       {"RobertaForSequenceClassification", RobertaHead::kSequenceClassification, kClassificationHead},
       {"RobertaForSpanPreTraining", RobertaHead::kSpanPreTraining, ""},
       {"RobertaForTokenClassification", RobertaHead::kTokenClassification, kTokenClassificationHead}});
  return table;
}

}  // namespace

BertConfig roberta_defaults() {
  BertConfig c;
  c.vocab_size = 50265;
  c.max_position_embeddings = 514;
  c.type_vocab_size = 1;
  c.layer_norm_eps = 1e-5;
  c.pad_token_id = 1;
  return c;
}

BertConfig roberta_config(const Json& j, const std::string& file) {
  BertConfig c = BertConfig::from_json(j, file, roberta_defaults());
  if (c.max_position_embeddings <= c.pad_token_id + 1) {
    throw InputError(file + ": key 'max_position_embeddings' = " + std::to_string(c.max_position_embeddings) +
                     " leaves no position after pad_token_id " + std::to_string(c.pad_token_id) +
                     " (RoBERTa's positions count from it: at least " + std::to_string(c.pad_token_id + 2) + ")");
  }
  return c;
}

RobertaImpl::RobertaImpl(BertConfig config_, RobertaHead head_) : config(std::move(config_)), head(head_) {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  if (c.max_position_embeddings <= c.pad_token_id + 1) {
    throw InputError("max_position_embeddings " + std::to_string(c.max_position_embeddings) +
                     " leaves no position after padding_idx " + std::to_string(c.pad_token_id) + " (RoBERTa counts from it)");
  }
  auto embedding = [&](int64_t rows) {
    return torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, d).padding_idx(c.pad_token_id));
  };
  word_embeddings = register_module("word_embeddings", embedding(c.vocab_size));
  position_embeddings = register_module("position_embeddings", embedding(c.max_position_embeddings));
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, d));
  embeddings_norm = register_module("embeddings_norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
  layers = register_module("layers", bert_encoder_layers(c));
  if (head == RobertaHead::kNone) pooler = register_module("pooler", torch::nn::Linear(d, d));
  if (head == RobertaHead::kMaskedLm || head == RobertaHead::kSpanPreTraining) {
    lm_dense = register_module("lm_dense", torch::nn::Linear(d, d));
    lm_norm = register_module("lm_norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
    lm_bias = register_parameter("lm_bias", at::zeros({c.vocab_size}));
  }
  if (head == RobertaHead::kSequenceClassification) {
    classifier_dense = register_module("classifier_dense", torch::nn::Linear(d, d));
    classifier_out = register_module("classifier_out", torch::nn::Linear(d, c.num_labels));
  }
  if (head == RobertaHead::kSpanPreTraining) {
    span_boundary = register_module("span_boundary", SpanBoundaryHead(span_boundary_options(c)));
  }
  if (head == RobertaHead::kTokenClassification) {
    token_classifier = register_module("token_classifier", TokenClassifier(d, c.num_labels, head_dropout(c)));
  }
  reset_parameters();
}

void RobertaImpl::reset_parameters() {
  // HF's RobertaPreTrainedModel._init_weights: N(0, initializer_range), zero biases and padding rows, unit norms.
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);
  word_embeddings->weight[config.pad_token_id].zero_();
  position_embeddings->weight[config.pad_token_id].zero_();
  reset_norms(*this);
  if (lm_bias.defined()) lm_bias.zero_();
}

std::string RobertaImpl::architecture() const { return roberta_architectures().name(head); }

Json RobertaImpl::config_json() const {
  Json j = config.to_json();
  j["model_type"] = "roberta";
  if (head == RobertaHead::kSequenceClassification || head == RobertaHead::kTokenClassification) {
    write_num_labels(j, config.num_labels);
  }
  if (head == RobertaHead::kSpanPreTraining) write_span_boundary_keys(j, config);
  return j;
}

at::Tensor RobertaImpl::position_ids(const at::Tensor& input_ids) const {
  // HF's create_position_ids_from_input_ids: padding keeps padding_idx; tokens count on from it.
  const at::Tensor real = input_ids.ne(config.pad_token_id).to(at::kLong);  // (B, T)
  return at::cumsum(real, 1) * real + config.pad_token_id;
}

at::Tensor RobertaImpl::encode(const Batch& batch, std::vector<at::Tensor>* hidden_states) {
  const at::Tensor& ids = batch.input_ids;
  const int64_t t = ids.size(1);
  at::Tensor types = batch.token_type_ids.defined() ? batch.token_type_ids : at::zeros_like(ids);
  at::Tensor x = word_embeddings(ids) + position_embeddings(position_ids(ids)) + token_type_embeddings(types);
  x = embeddings_norm(x);  // (B, T, D)
  if (is_training() && config.hidden_dropout_prob > 0) x = nn::dropout(x, config.hidden_dropout_prob, true);
  if (hidden_states) hidden_states->push_back(x);
  at::Tensor bias = nn::attention_bias(batch.attention_mask, false, t, t, x.scalar_type(), x.device());
  return run_layers(layers, x, bias, {}, {}, nullptr, hidden_states);
}

at::Tensor RobertaImpl::lm_transform(const at::Tensor& hidden) {
  return lm_norm(nn::activate(lm_dense(hidden), nn::parse_activation(config.hidden_act)));  // (..., D)
}

Output RobertaImpl::forward(const Batch& batch) {
  Output out;
  out.last_hidden_state = encode(batch, output_hidden_states ? &out.hidden_states : nullptr);  // (B, T, D)
  const at::Tensor first = out.last_hidden_state.select(1, 0);                                  // (B, D): <s>
  if (pooler) out.pooler_output = at::tanh(pooler(first));
  if (lm_dense) {
    const at::Tensor& labels = batch.labels;
    if (full_logits || !labels.defined()) {
      out.logits = at::linear(lm_transform(out.last_hidden_state), word_embeddings->weight, lm_bias);  // (B, T, V)
    }
    if (labels.defined()) {
      add_masked_lm_term(out, labels, [this](const at::Tensor& h) { return lm_transform(h); }, word_embeddings->weight,
                         lm_bias);
      if (span_boundary) span_boundary->add_term(out, out.last_hidden_state, labels, word_embeddings->weight);
    }
  }
  if (token_classifier) token_classifier->apply(out, out.last_hidden_state, batch.labels);
  if (head == RobertaHead::kSequenceClassification) {
    // RobertaClassificationHead: dropout, dense, tanh, dropout, out_proj on <s>.
    const double p = head_dropout(config);
    auto drop = [&](const at::Tensor& x) { return is_training() && p > 0 ? nn::dropout(x, p, true) : x; };
    out.logits = classifier_out(drop(at::tanh(classifier_dense(drop(first)))));  // (B, num_labels)
    if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> RobertaImpl::loss_targets(const Batch& b) const {
  if (!lm_dense) return Model::loss_targets(b);
  std::vector<std::pair<std::string, int64_t>> t = {{"mlm", b.labels.defined() ? b.labels.ne(-100).sum().item<int64_t>() : 0}};
  if (span_boundary) t.emplace_back("sbo", count_span_targets(b.labels, config.span_boundary_max_targets));
  return t;
}

double RobertaImpl::flops_per_token(int64_t seq_len, int64_t) const {
  return bert_encoder_flops_per_token(layers, seq_len, config, static_cast<bool>(lm_dense), span_boundary);
}

void RobertaImpl::check_batch(const Batch& b) const {
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture());
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture());
  check_extra_inputs(b, {}, architecture());
  check_token_matrix(b.input_ids, config.vocab_size, "input_ids");
  if (b.input_ids.size(1) > max_length()) {
    throw InputError("input_ids has " + std::to_string(b.input_ids.size(1)) + " positions; " + architecture() +
                     " takes at most " + std::to_string(max_length()) + " (max_position_embeddings " +
                     std::to_string(config.max_position_embeddings) + " less padding_idx + 1)");
  }
  check_token_ids(b.token_type_ids, config.type_vocab_size, "token_type_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
  check_same_shape(b.token_type_ids, b.input_ids, "token_type_ids", "input_ids");
  if (token_classifier) check_token_labels(b, config.num_labels);
  else check_input_labels(b, head == RobertaHead::kSequenceClassification, config.num_labels, config.vocab_size);
}

std::vector<HfTensor> RobertaImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = head == RobertaHead::kNone ? "" : "roberta.";  // HF's RobertaModel has no prefix
  t.push_back({b + "embeddings.word_embeddings.weight", word_embeddings->weight});
  t.push_back({b + "embeddings.position_embeddings.weight", position_embeddings->weight});
  t.push_back({b + "embeddings.token_type_embeddings.weight", token_type_embeddings->weight});
  add_norm(t, b + "embeddings.LayerNorm", embeddings_norm);
  add_bert_encoder_tensors(t, b, layers);
  if (pooler) add_linear(t, "pooler.dense", pooler);
  if (lm_dense) {
    t.push_back({"lm_head.bias", lm_bias});
    add_linear(t, "lm_head.dense", lm_dense);
    add_norm(t, "lm_head.layer_norm", lm_norm);
  }
  if (span_boundary) span_boundary->add_hf_tensors(t, "pair_target_predictions.");
  if (classifier_dense) {
    add_linear(t, "classifier.dense", classifier_dense);
    add_linear(t, "classifier.out_proj", classifier_out);
  }
  if (token_classifier) token_classifier->add_hf_tensors(t);
  return t;
}

bool RobertaImpl::hf_ignorable(const std::string& name) const {
  // The decoder tied to the embeddings (and its bias to lm_head.bias), and old checkpoints' position_ids buffer.
  return name == "lm_head.decoder.weight" || name == "lm_head.decoder.bias" || name == "roberta.embeddings.position_ids" ||
         name == "embeddings.position_ids";
}

Family roberta_family() {
  Family f;
  f.model_type = "roberta";
  f.architectures = roberta_architectures().names();
  f.heads = roberta_architectures().heads();
  f.objectives = {{"mlm", "RobertaForMaskedLM"}, {"mlm+sbo", "RobertaForSpanPreTraining"}};
  f.tokenizer_family = "roberta";
  f.positions_key = "max_position_embeddings";
  f.max_length_of = [](const Json& config) {  // as RobertaImpl::max_length (roberta-base: 514 -> 512)
    const BertConfig c = roberta_config(config, "config.json");
    return c.max_position_embeddings - c.pad_token_id - 1;
  };
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = [](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<Model> {
    BertConfig c = roberta_config(config, file);
    return std::make_shared<RobertaImpl>(c, roberta_architectures().head(arch));
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t) {
    config["vocab_size"] = vocab_size;
    config["pad_token_id"] = pad;  // positions count from it
  };
  return f;
}

}  // namespace lmkit::models
