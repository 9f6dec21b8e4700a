#include "lmkit/models/bert.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "lmkit/models/architectures.h"
#include "lmkit/models/attention_config.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/encoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/models/roberta.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::models {

const ArchitectureTable<BertHead>& bert_architectures(const std::string& model_type) {
  static const ArchitectureTable<BertHead> bert(
      {{"BertForPreTraining", BertHead::kPreTraining, ""},
       {"BertModel", BertHead::kNone, ""},
       {"BertForMaskedLM", BertHead::kMaskedLm, ""},
       {"BertForSequenceClassification", BertHead::kSequenceClassification, kClassificationHead},
       {"BertForSpanPreTraining", BertHead::kSpanPreTraining, ""},
       {"BertForTokenClassification", BertHead::kTokenClassification, kTokenClassificationHead},
       {"BertForQuestionAnswering", BertHead::kQuestionAnswering, kQuestionAnsweringHead}});
  static const ArchitectureTable<BertHead> roberta(
      {{"RobertaForMaskedLM", BertHead::kMaskedLm, ""},
       {"RobertaModel", BertHead::kNone, ""},
       {"RobertaForSequenceClassification", BertHead::kSequenceClassification, kClassificationHead},
       {"RobertaForSpanPreTraining", BertHead::kSpanPreTraining, ""},
       {"RobertaForTokenClassification", BertHead::kTokenClassification, kTokenClassificationHead},
       {"RobertaForQuestionAnswering", BertHead::kQuestionAnswering, kQuestionAnsweringHead}});
  static const ArchitectureTable<BertHead> longformer(
      {{"LongformerForMaskedLM", BertHead::kMaskedLm, ""},
       {"LongformerModel", BertHead::kNone, ""},
       {"LongformerForSequenceClassification", BertHead::kSequenceClassification, kClassificationHead},
       {"LongformerForTokenClassification", BertHead::kTokenClassification, kTokenClassificationHead},
       {"LongformerForQuestionAnswering", BertHead::kQuestionAnswering, kQuestionAnsweringHead}});
  static const ArchitectureTable<BertHead> big_bird(
      {{"BigBirdForPreTraining", BertHead::kPreTraining, ""},
       {"BigBirdModel", BertHead::kNone, ""},
       {"BigBirdForMaskedLM", BertHead::kMaskedLm, ""},
       {"BigBirdForSequenceClassification", BertHead::kSequenceClassification, kClassificationHead},
       {"BigBirdForTokenClassification", BertHead::kTokenClassification, kTokenClassificationHead},
       {"BigBirdForQuestionAnswering", BertHead::kQuestionAnswering, kQuestionAnsweringHead}});
  if (model_type == "big_bird") return big_bird;
  return model_type == "longformer" ? longformer : model_type == "roberta" ? roberta : bert;
}

namespace {

// Where BERT's and RoBERTa's checkpoints put the same tensors.
struct HfNames {
  std::string base;   ///< the encoder's prefix under a head
  std::string mlm;    ///< the MLM head
  std::string dense;  ///< its transform, under mlm
  std::string norm;
  std::string span;   ///< SpanBERT's head
};

const HfNames& hf_names(const std::string& model_type) {
  static const HfNames bert{"bert.", "cls.predictions.", "transform.dense", "transform.LayerNorm", "cls.pair_target_predictions."};
  static const HfNames roberta{"roberta.", "lm_head.", "dense", "layer_norm", "pair_target_predictions."};
  static const HfNames longformer{"longformer.", "lm_head.", "dense", "layer_norm", "pair_target_predictions."};
  if (model_type == "longformer") return longformer;
  return model_type == "roberta" ? roberta : bert;  // BigBird's are BERT's
}

// Longformer's windows: one even number for every layer (HF's int, written back as one) or a list.
ConfigField<BertConfig> attention_window_field() {
  ConfigField<BertConfig> f{"attention_window", "even integer >= 2, or a list of one a layer",
                            [](ConfigReader& r, BertConfig& c) {
                              Json v;
                              if (!r.get("attention_window", v)) return;
                              const bool list = v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_number_integer(); });
                              if (!v.is_number_integer() && !list) {
                                throw InputError(r.file() + ": key 'attention_window' = " + brief_json(v) +
                                                 " is not an integer or a list of integers");
                              }
                              c.attention_window = list ? v.get<std::vector<int64_t>>() : std::vector<int64_t>{v.get<int64_t>()};
                            },
                            [](const BertConfig& c) {
                              return c.attention_window.size() == 1 ? Json(c.attention_window[0]) : Json(c.attention_window);
                            },
                            {}, {}, {}};
  return f.owned_by([](const BertConfig& c) { return c.model_type == "longformer"; }, "Longformer",
                    [](const BertConfig& c) { return c.model_type; });
}

}  // namespace

const ConfigTable<BertConfig>& BertConfig::table() {
  using C = BertConfig;
  static const ConfigTable<C> table = [] {
    auto classifies = [](const C& c) {
      return c.head == BertHead::kSequenceClassification || c.head == BertHead::kTokenClassification ||
             c.head == BertHead::kQuestionAnswering;  // HF's QA configs carry id2label, two entries
    };
    auto span = [](const C& c) { return c.head == BertHead::kSpanPreTraining; };
    auto longformer = [](const C& c) { return c.model_type == "longformer"; };
    auto big_bird = [](const C& c) { return c.model_type == "big_bird"; };
    auto kind = [](const C& c) { return c.model_type; };
    ConfigField<C> pad = fields::number("pad_token_id", &C::pad_token_id, int64_t{0});
    pad.read = [](ConfigReader& r, C& c) { r.get_nullable("pad_token_id", c.pad_token_id, c.pad_token_id, int64_t{0}); };
    std::vector<ConfigField<C>> rows = {
         fields::number("vocab_size", &C::vocab_size, int64_t{1}),
         fields::number("hidden_size", &C::hidden_size, int64_t{1}),
         fields::number("num_hidden_layers", &C::num_hidden_layers, int64_t{0}),
         fields::number("num_attention_heads", &C::num_attention_heads, int64_t{1}),
         fields::number("intermediate_size", &C::intermediate_size, int64_t{1}),
         fields::choice("hidden_act", &C::hidden_act, {"gelu", "gelu_new", "relu"}),
         fields::number("hidden_dropout_prob", &C::hidden_dropout_prob, 0.0, 1.0),
         fields::number("attention_probs_dropout_prob", &C::attention_probs_dropout_prob, 0.0, 1.0),
         fields::number("max_position_embeddings", &C::max_position_embeddings, int64_t{1}),
         fields::number("type_vocab_size", &C::type_vocab_size, int64_t{1}),
         fields::number("initializer_range", &C::initializer_range, 0.0),
         fields::number("layer_norm_eps", &C::layer_norm_eps, 0.0),
         pad,  // null keeps the default (a padding row: RoBERTa's positions count from it)
         fields::nullable("classifier_dropout", &C::classifier_dropout, -1.0, 0.0, 1.0),
         fields::fixed<C>("position_embedding_type", "absolute")};
    // Longformer and BigBird choose their own attention: "attention" and its keys are not theirs to list.
    auto chooses = [](const C& c) { return c.model_type != "longformer" && c.model_type != "big_bird"; };
    for (auto& row : attention_config_fields(&C::attention, &C::attention_fields)) {
      auto listed = row.reads;
      rows.push_back(row.listed_when([=](const C& c) { return chooses(c) && (!listed || listed(c)); }));
    }
    rows.insert(rows.end(), {
         attention_window_field(),
         fields::token_id("sep_token_id", &C::sep_token_id).when([](const C& c) { return c.model_type != "bert" && c.model_type != "roberta"; }),
         fields::fixed<C>("onnx_export", false).when(longformer),
         fields::choice("attention_type", &C::attention_type, {"block_sparse", "original_full"}).owned_by(big_bird, "BigBird", kind),
         fields::number("block_size", &C::block_size, int64_t{1}).owned_by(big_bird, "BigBird", kind),
         fields::number("num_random_blocks", &C::num_random_blocks, int64_t{0}).owned_by(big_bird, "BigBird", kind),
         fields::fixed<C>("use_bias", true).when(big_bird),
         fields::fixed<C>("rescale_embeddings", false).when(big_bird),
         fields::number("span_boundary_max_targets", &C::span_boundary_max_targets, int64_t{1}).when(span).listed_when(span),
         fields::number("span_boundary_position_size", &C::span_boundary_position_size, int64_t{1}).when(span).listed_when(span),
         labels_field(&C::num_labels).when(classifies)});
    return ConfigTable<C>(rows, {"bos_token_id", "eos_token_id", "decoder_start_token_id", "tie_word_embeddings"});
  }();
  return table;
}

BertConfig BertConfig::from_json(const Json& j, const std::string& file) { return from_json(j, file, BertConfig()); }

BertConfig BertConfig::from_json(const Json& j, const std::string& file, BertConfig defaults) {
  BertConfig c = std::move(defaults);
  read_hf_config(table(), j, file, c);
  // The padding row is one of the embedding's (a default pad too: RoBERTa's 1).
  check_config_token_ids(j, file, c.vocab_size, {{"pad_token_id", c.pad_token_id}});
  // A default separator outside a smaller vocabulary (BigBird's 66 under a trained tokenizer of 30
  // pieces) is none, not a config that the checkpoint written from it could not load again.
  if (c.sep_token_id >= c.vocab_size && !j.contains("sep_token_id")) c.sep_token_id = -1;
  if (c.hidden_size % c.num_attention_heads != 0) {
    throw InputError(file + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
                     std::to_string(c.num_attention_heads));
  }
  check_attention_config(c, j, file);
  return c;
}

Json BertConfig::to_json() const {
  return write_hf_config(table(), model_type, *this);
}

BertImpl::BertImpl(BertConfig config_) : config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  auto padded = [&](int64_t rows) { return torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, d).padding_idx(c.pad_token_id)); };
  word_embeddings = register_module("word_embeddings", padded(c.vocab_size));
  if (roberta()) {
    if (c.max_position_embeddings <= c.pad_token_id + 1) {
      throw InputError("max_position_embeddings " + std::to_string(c.max_position_embeddings) +
                       " leaves no position after padding_idx " + std::to_string(c.pad_token_id) + " (RoBERTa counts from it)");
    }
    position_embeddings = register_module("position_embeddings", padded(c.max_position_embeddings));
  } else {
    absolute_positions = register_module("position_embeddings", nn::LearnedPositions(c.max_position_embeddings, d));
  }
  token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, d));
  embeddings_norm = register_module("embeddings_norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
  layers = register_module("layers", bert_encoder_layers(c));
  build_heads();
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void BertImpl::build_heads() {
  const auto& c = config;
  const int64_t d = c.hidden_size;
  const BertHead h = c.head;
  // BigBird's every head sits on BigBirdModel with its pooler, but for question answering (add_pooling_layer=False).
  const bool pooled = h == BertHead::kNone || (big_bird() && h != BertHead::kQuestionAnswering) ||
                      (!roberta() && (h == BertHead::kPreTraining || h == BertHead::kSequenceClassification));
  if (pooled) pooler = register_module("pooler", torch::nn::Linear(d, d));
  if (h == BertHead::kPreTraining || h == BertHead::kMaskedLm || h == BertHead::kSpanPreTraining) {
    const std::string name = roberta() ? "lm_" : "mlm_";  // lmkit's own names, as before the two shared a class
    mlm_dense = register_module(name + "dense", torch::nn::Linear(d, d));
    mlm_norm = register_module(name + "norm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
    mlm_bias = register_parameter(name + "bias", at::zeros({c.vocab_size}));
  }
  if (h == BertHead::kPreTraining) nsp = register_module("nsp", torch::nn::Linear(d, 2));
  if (h == BertHead::kSequenceClassification && (roberta() || big_bird())) {
    classifier_dense = register_module("classifier_dense", torch::nn::Linear(d, d));
    classifier_out = register_module("classifier_out", torch::nn::Linear(d, c.num_labels));
  }
  if (h == BertHead::kSpanPreTraining) span_boundary = register_module("span_boundary", SpanBoundaryHead(span_boundary_options(c)));
  if (h == BertHead::kSequenceClassification && !classifier_dense) classifier = register_module("classifier", torch::nn::Linear(d, c.num_labels));
  if (h == BertHead::kTokenClassification) {
    token_classifier = register_module("token_classifier", TokenClassifier(d, c.num_labels, head_dropout(c)));
  }
  if (h == BertHead::kQuestionAnswering) {
    check_input(c.num_labels == 2, architecture() + " has two outputs a token (start, end); the config says num_labels " +
                                       std::to_string(c.num_labels));
    QuestionAnsweringOptions o;
    o.hidden_size = d;
    if (big_bird()) {
      o.intermediate_size = c.intermediate_size;
      o.activation = nn::parse_activation(c.hidden_act);
      o.dropout = c.hidden_dropout_prob;
      o.layer_norm_eps = c.layer_norm_eps;
    }
    qa_head = register_module("qa_head", QuestionAnsweringHead(o));
  }
}

void BertImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);
  if (absolute_positions) absolute_positions->weight.normal_(0, config.initializer_range);
  word_embeddings->weight[config.pad_token_id].zero_();
  if (position_embeddings) position_embeddings->weight[config.pad_token_id].zero_();
  reset_norms(*this);
  if (mlm_bias.defined()) mlm_bias.zero_();  // the MLM bias starts at zero
}

std::string BertImpl::hf_base_prefix() const { return hf_names(config.model_type).base; }

std::string BertImpl::architecture() const { return bert_architectures(config.model_type).name(config.head); }

Json BertImpl::config_fields() const {
  return BertConfig::table().describe(config, encoder_defaults(config.model_type));
}

at::Tensor BertImpl::position_ids(const at::Tensor& input_ids) const {
  if (!roberta()) return at::arange(input_ids.size(1), input_ids.options()).unsqueeze(0).expand_as(input_ids);
  const at::Tensor real = input_ids.ne(config.pad_token_id).to(at::kLong);  // (B, T)
  return at::cumsum(real, 1) * real + config.pad_token_id;
}

int64_t BertImpl::max_length() const { return bert_max_length(config); }

bool BertImpl::takes_documents() const { return nn::attention(encoder_attention(config)).documents; }

int64_t BertImpl::first_position() const {
  if (!takes_documents()) return -1;
  return roberta() ? config.pad_token_id + 1 : 0;
}

at::Tensor BertImpl::encode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                            const at::Tensor& token_type_ids, std::vector<at::Tensor>* hidden_states,
                            const at::Tensor& global_attention_mask, const Packing& packing,
                            const at::Tensor& random_blocks) {
  at::Tensor types = token_type_ids.defined() ? token_type_ids : at::zeros_like(input_ids);
  // HF: BERT's position_ids = arange(T), whatever the padding; RoBERTa's skip it; given ones are taken as they are.
  const at::Tensor& given = packing.position_ids;
  at::Tensor positions = roberta()         ? position_embeddings(given.defined() ? given.to(at::kLong) : position_ids(input_ids))
                         : given.defined() ? absolute_positions->at(given)
                                           : absolute_positions(input_ids.size(1));
  at::Tensor x = word_embeddings(input_ids) + positions + token_type_embeddings(types);
  return run_bert_encoder(*this, config, x, attention_mask, embeddings_norm, layers, hidden_states,
                          {global_attention_mask, packing.document_ids, random_blocks});  // (B, T, D)
}

at::Tensor BertImpl::mlm_transform(const at::Tensor& hidden) {
  return mlm_norm(nn::activate(mlm_dense(hidden), nn::parse_activation(config.hidden_act)));  // (..., D)
}

at::Tensor BertImpl::mlm_logits(const at::Tensor& hidden) {
  return at::linear(mlm_transform(hidden), word_embeddings->weight, mlm_bias);  // (..., V)
}

at::Tensor BertImpl::global_tokens(const Batch& batch) const {
  if (config.model_type != "longformer") return {};
  at::Tensor global = batch.field(kGlobalAttentionMask);
  if (global.defined()) return global;
  if (config.head == BertHead::kQuestionAnswering) return question_global_attention(batch.input_ids, config.sep_token_id);
  if (config.head != BertHead::kSequenceClassification) return global;
  // HF's LongformerForSequenceClassification: global attention on <s> unless told otherwise.
  global = at::zeros_like(batch.input_ids);
  global.select(1, 0).fill_(1);
  return global;
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
  return masked_lm_targets(b, config.head == BertHead::kPreTraining, static_cast<bool>(span_boundary),
                           config.span_boundary_max_targets);
}

double BertImpl::flops_per_token(int64_t seq_len, int64_t) const {
  return bert_encoder_flops_per_token(layers, seq_len, config, static_cast<bool>(mlm_dense), span_boundary);
}

Output BertImpl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  // HF's BigBirdForQuestionAnswering: the question (to the first [SEP]) leaves the competition
  // but for [CLS], and is token type 0 (the context 1) where no token types are given.
  at::Tensor question, types = batch.token_type_ids;
  if (qa_head && big_bird()) {
    question = question_tokens(batch.input_ids, config.sep_token_id);
    if (!types.defined()) types = 1 - question;
    question = question.clone();
    question.select(1, 0).zero_();
  }
  out.last_hidden_state = encode(batch.input_ids, batch.attention_mask, types, hs, global_tokens(batch),
                                 Packing::of(batch), batch.field(kBigBirdRandomBlocks));
  if (pooler) out.pooler_output = at::tanh(pooler(out.last_hidden_state.select(1, 0)));              // (B, D)
  if (mlm_dense) {
    apply_masked_lm(out, batch.labels, full_logits, [this](const at::Tensor& h) { return mlm_transform(h); },
                    word_embeddings->weight, mlm_bias, span_boundary);
    if (nsp && out.logits.defined()) out.named.emplace_back("prediction_logits", out.logits);
  }
  if (nsp) next_sentence(batch, out);
  if (token_classifier) token_classifier->apply(out, out.last_hidden_state, batch.labels);
  if (qa_head) qa_head->apply(out, out.last_hidden_state, question, batch.field(kStartPositions), batch.field(kEndPositions));
  if (config.head == BertHead::kSequenceClassification) classify(batch, out);
  return out;
}

void BertImpl::classify(const Batch& batch, Output& out) {
  const double p = head_dropout(config);
  auto drop = [&](const at::Tensor& x) { return is_training() && p > 0 ? nn::dropout(x, p, true) : x; };
  if (classifier) out.logits = classifier(drop(out.pooler_output));  // (B, num_labels)
  // RobertaClassificationHead: dropout, dense, tanh, dropout, out_proj on <s>; BigBird's takes hidden_act for tanh.
  else {
    const at::Tensor h = classifier_dense(drop(out.last_hidden_state.select(1, 0)));
    out.logits = classifier_out(drop(big_bird() ? nn::activate(h, nn::parse_activation(config.hidden_act)) : at::tanh(h)));
  }
  if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
}

void BertImpl::check_batch(const Batch& b) const {
  std::vector<std::string> extras;
  if (config.head == BertHead::kPreTraining) extras.push_back(kNextSentenceLabel);
  if (config.model_type == "longformer") extras.push_back(kGlobalAttentionMask);
  if (big_bird()) extras.push_back(kBigBirdRandomBlocks);
  if (takes_documents()) extras.insert(extras.end(), {kDocumentIds, kPositionIds});
  if (qa_head) {
    extras.insert(extras.end(), {kStartPositions, kEndPositions});
    check_unused(b.labels, "labels", architecture() + " (it takes start_positions and end_positions)");
    check_answer_positions(b);
  }
  check_encoder_batch(b, architecture(), config, extras,
                      config.head == BertHead::kSequenceClassification, static_cast<bool>(token_classifier));
  check_packing(b, config.max_position_embeddings);
  check_row_labels(b.field(kNextSentenceLabel), b.input_ids.size(0), 2, kNextSentenceLabel);
}

std::vector<HfTensor> BertImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const HfNames& n = hf_names(config.model_type);
  const std::string b = config.head == BertHead::kNone ? "" : n.base;  // HF's BertModel/RobertaModel have no prefix
  t.push_back({b + "embeddings.word_embeddings.weight", word_embeddings->weight});
  t.push_back({b + "embeddings.position_embeddings.weight", roberta() ? position_embeddings->weight : absolute_positions->weight});
  t.push_back({b + "embeddings.token_type_embeddings.weight", token_type_embeddings->weight});
  add_norm(t, b + "embeddings.LayerNorm", embeddings_norm);
  add_bert_encoder_tensors(t, b, layers);
  if (pooler) add_linear(t, b + (big_bird() ? "pooler" : "pooler.dense"), pooler);  // BigBirdModel's is a Linear
  if (mlm_dense) {
    t.push_back({n.mlm + "bias", mlm_bias});
    add_linear(t, n.mlm + n.dense, mlm_dense);
    add_norm(t, n.mlm + n.norm, mlm_norm);
  }
  if (nsp) add_linear(t, "cls.seq_relationship", nsp);
  if (span_boundary) span_boundary->add_hf_tensors(t, n.span);
  if (classifier) add_linear(t, "classifier", classifier);
  if (classifier_dense) add_linear(t, "classifier.dense", classifier_dense);
  if (classifier_out) add_linear(t, "classifier.out_proj", classifier_out);
  if (token_classifier) token_classifier->add_hf_tensors(t);
  if (qa_head) qa_head->add_hf_tensors(t);
  return t;
}

bool BertImpl::hf_ignorable(const std::string& name) const {
  // Tied duplicates HF drops on save (the decoder is the word embeddings, its bias the MLM head's),
  // and the position_ids buffer of old checkpoints.
  const HfNames& n = hf_names(config.model_type);
  return name == n.mlm + "decoder.weight" || name == n.mlm + "decoder.bias" || name == n.base + "embeddings.position_ids" ||
         name == "embeddings.position_ids";
}

Family bert_family() {
  Family f;
  f.model_type = "bert";
  f.summary = "BERT (Devlin et al. 2019): a bidirectional Transformer encoder, post-norm, learned positions";
  f.architectures = bert_architectures("bert").names();
  f.heads = bert_architectures("bert").heads();
  f.objectives = {{"mlm+nsp", "BertForPreTraining"}, {"mlm", "BertForMaskedLM"}, {"mlm+sbo", "BertForSpanPreTraining"}};
  f.tokenizer_family = "bert";
  f.positions_key = "max_position_embeddings";
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = family_creator<BertImpl, BertConfig>(bert_architectures("bert"), [](const Json& j, const std::string& file) {
    return BertConfig::from_json(j, file);
  });
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t) { config["vocab_size"] = vocab_size; };
  return f;
}

}  // namespace lmkit::models
