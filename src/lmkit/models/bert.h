// BERT (Devlin et al. 2018) as HF's BertModel and its heads: post-norm encoder,
// word + learned position + token-type embeddings, exact GELU, LayerNorm eps 1e-12.
#pragma once

#include <functional>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/model.h"
#include "lmkit/models/span_boundary.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"

namespace lmkit::models {

enum class BertHead {
  kNone,                    ///< BertModel: last_hidden_state and pooler_output
  kPreTraining,             ///< BertForPreTraining: MLM + NSP
  kMaskedLm,                ///< BertForMaskedLM: MLM only, no pooler
  kSequenceClassification,  ///< BertForSequenceClassification: pooled [CLS] -> dropout -> linear
  kSpanPreTraining,         ///< BertForSpanPreTraining: MLM + SpanBERT's span boundary objective, no pooler
  kTokenClassification,     ///< BertForTokenClassification: every token -> dropout -> linear, no pooler
};

/// HF's BertConfig keys.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  double classifier_dropout = -1;  ///< < 0: use hidden_dropout_prob (HF: null)
  int64_t num_labels = 2;
  int64_t span_boundary_max_targets = 20;     ///< SpanBERT's head: relative positions (tokens of a span it predicts)
  int64_t span_boundary_position_size = 200;  ///< and the width of their embedding
  BertHead head = BertHead::kPreTraining;

  /// The keys `j` holds over `defaults` (RoBERTa reads BERT's keys over its own defaults).
  static BertConfig from_json(const Json& j, const std::string& file, BertConfig defaults);
  static BertConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class BertImpl : public Model {
 public:
  explicit BertImpl(BertConfig config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return "bert"; }
  std::string architecture() const override;
  Json config_json() const override { return config.to_json(); }
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "bert."; }
  std::vector<std::pair<std::string, int64_t>> loss_targets(const Batch& batch) const override;
  std::vector<std::string> metric_names() const override {
    return config.head == BertHead::kPreTraining ? std::vector<std::string>{"nsp_accuracy"} : std::vector<std::string>{};
  }
  int64_t vocab_size() const override { return config.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override;

  /// Encoder output (B, T, D) for ids (B, T); mask and token types may be undefined.
  at::Tensor encode(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& token_type_ids,
                    std::vector<at::Tensor>* hidden_states = nullptr);
  /// MLM logits for hidden rows (..., D) -> (..., V): transform, then the tied decoder.
  at::Tensor mlm_logits(const at::Tensor& hidden);
  /// The MLM head's transform (dense, activation, norm) before the vocabulary projection.
  at::Tensor mlm_transform(const at::Tensor& hidden);
  /// Re-initialises every weight as HF does (N(0, initializer_range), zero biases, unit norms).
  void reset_parameters();

  BertConfig config;
  /// The MLM term ("mlm") and logits; NSP's term ("nsp"), logits and, in eval mode, accuracy.
  void masked_lm(const Batch& batch, Output& out);
  void next_sentence(const Batch& batch, Output& out);

  torch::nn::Embedding word_embeddings{nullptr};        ///< (V, D), tied to the MLM decoder
  nn::LearnedPositions position_embeddings{nullptr};    ///< (max_position_embeddings, D)
  torch::nn::Embedding token_type_embeddings{nullptr};  ///< (type_vocab_size, D)
  nn::Norm embeddings_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};                ///< num_hidden_layers x TransformerLayer (post-norm)
  torch::nn::Linear pooler{nullptr};                    ///< (D, D), tanh; absent for kMaskedLm
  torch::nn::Linear mlm_dense{nullptr};                 ///< (D, D) transform before the decoder
  nn::Norm mlm_norm{nullptr};
  at::Tensor mlm_bias;                                  ///< (V) decoder bias
  torch::nn::Linear nsp{nullptr};                       ///< (2, D) on the pooled output
  torch::nn::Linear classifier{nullptr};                ///< (num_labels, D)
  SpanBoundaryHead span_boundary{nullptr};              ///< kSpanPreTraining
  TokenClassifier token_classifier{nullptr};            ///< kTokenClassification
};
TORCH_MODULE(Bert);

/// What BERT and RoBERTa share (RoBERTa is BERT's encoder with other embeddings and heads):
/// the post-norm layer stack a config describes,
torch::nn::ModuleList bert_encoder_layers(const BertConfig& config);
/// its HF tensors (`prefix` + "encoder.layer.N....", HF's BertLayer names),
void add_bert_encoder_tensors(std::vector<HfTensor>& out, const std::string& prefix, torch::nn::ModuleList& layers);
/// the masked-LM term "mlm" (full `logits` when defined, else projected only at the labelled
/// positions through `transform` and the tied `weight`, `bias`), set as out.terms/out.loss,
void add_masked_lm_term(Output& out, const at::Tensor& labels, const std::function<at::Tensor(const at::Tensor&)>& transform,
                        const at::Tensor& weight, const at::Tensor& bias);
/// SpanBERT's span boundary head over this encoder (span_boundary.h),
SpanBoundaryOptions span_boundary_options(const BertConfig& config);
/// the config keys of span pretraining (written only by span heads),
void write_span_boundary_keys(Json& j, const BertConfig& config);
/// HF's initialisation of the norms (LayerNorm weights one, biases zero, by parameter name),
void reset_norms(torch::nn::Module& module);
/// the token-classification head's dropout (classifier_dropout, else hidden_dropout_prob),
double head_dropout(const BertConfig& config);
/// and forward FLOPs per token: the layers, plus an MLM head on the ~15% labelled positions.
double bert_encoder_flops_per_token(const torch::nn::ModuleList& layers, int64_t seq_len, const BertConfig& config,
                                    bool mlm_head, const SpanBoundaryHead& span_boundary = nullptr);

struct Family;
/// The bert family (family.h): its architectures, objectives and how to build it.
Family bert_family();

}  // namespace lmkit::models
