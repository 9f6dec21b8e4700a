// RoBERTa (Liu et al. 2019) as HF's RobertaModel and its heads: BERT's post-norm
// encoder with positions counted from padding_idx + 1 over the non-padding tokens
// (HF's create_position_ids_from_input_ids), one token type, an LM head named
// lm_head (dense, GELU, LayerNorm, tied decoder) and a two-layer classification
// head on <s> instead of BERT's pooler. The config is BERT's, with RoBERTa's defaults.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/bert.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

enum class RobertaHead {
  kNone,                    ///< RobertaModel: last_hidden_state and pooler_output
  kMaskedLm,                ///< RobertaForMaskedLM: MLM (no pooler)
  kSequenceClassification,  ///< RobertaForSequenceClassification: `<s>` -> dense -> tanh -> out_proj (no pooler)
  kSpanPreTraining,         ///< RobertaForSpanPreTraining: MLM + SpanBERT's span boundary objective (no pooler)
  kTokenClassification,     ///< RobertaForTokenClassification: every token -> dropout -> linear (no pooler)
};

/// RobertaConfig's defaults (roberta-base): BertConfig's keys.
BertConfig roberta_defaults();
/// A RoBERTa config.json read over those defaults, with the positions that padding_idx
/// leaves checked (InputError naming `file`).
BertConfig roberta_config(const Json& j, const std::string& file);

class RobertaImpl : public Model {
 public:
  RobertaImpl(BertConfig config, RobertaHead head);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return "roberta"; }
  std::string architecture() const override;
  Json config_json() const override;
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "roberta."; }
  std::vector<std::pair<std::string, int64_t>> loss_targets(const Batch& batch) const override;
  int64_t vocab_size() const override { return config.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override;

  /// Position ids (B, T) as HF: padding_idx + the running count of non-padding tokens, padding at padding_idx.
  at::Tensor position_ids(const at::Tensor& input_ids) const;
  /// Encoder output (B, T, D).
  at::Tensor encode(const Batch& batch, std::vector<at::Tensor>* hidden_states = nullptr);
  /// The LM head's transform (dense, GELU, LayerNorm) before the tied vocabulary projection.
  at::Tensor lm_transform(const at::Tensor& hidden);
  /// Longest input: max_position_embeddings - padding_idx - 1 (512 for roberta-base's 514).
  int64_t max_length() const { return config.max_position_embeddings - config.pad_token_id - 1; }
  void reset_parameters();

  BertConfig config;
  RobertaHead head;
  torch::nn::Embedding word_embeddings{nullptr};        ///< (V, D), tied to the LM head's decoder
  torch::nn::Embedding position_embeddings{nullptr};    ///< (max_position_embeddings, D), padding_idx = pad
  torch::nn::Embedding token_type_embeddings{nullptr};  ///< (type_vocab_size, D)
  nn::Norm embeddings_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};                ///< num_hidden_layers x TransformerLayer (post-norm)
  torch::nn::Linear pooler{nullptr};                    ///< RobertaModel only
  torch::nn::Linear lm_dense{nullptr};
  nn::Norm lm_norm{nullptr};
  at::Tensor lm_bias;                                   ///< (V)
  torch::nn::Linear classifier_dense{nullptr}, classifier_out{nullptr};
  TokenClassifier token_classifier{nullptr};            ///< kTokenClassification
  SpanBoundaryHead span_boundary{nullptr};              ///< kSpanPreTraining
};
TORCH_MODULE(Roberta);

struct Family;
/// The roberta family (family.h).
Family roberta_family();

}  // namespace lmkit::models
