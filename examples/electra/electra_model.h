// ELECTRA's models as HF's Electra* classes: BERT's post-norm encoder under embeddings
// of their own width (embedding_size, projected to hidden_size by embeddings_project
// when the two differ), with the discriminator's replaced-token head, the generator's
// MLM head tied to the word embeddings, and the two classifiers.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/bert.h"
#include "lmkit/models/model.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"

namespace electra {

using lmkit::Json;

enum class ElectraHead {
  kNone,                    ///< ElectraModel: last_hidden_state
  kPreTraining,             ///< ElectraForPreTraining: a replaced-or-original logit per token
  kMaskedLm,                ///< ElectraForMaskedLM: the generator
  kSequenceClassification,  ///< ElectraForSequenceClassification: [CLS] -> dense -> GELU -> out_proj
  kTokenClassification,     ///< ElectraForTokenClassification: every token -> dropout -> classifier
};

/// HF's ElectraConfig keys: BertConfig's plus embedding_size; and lmkit's two keys of
/// the electra objective, which HF's from_pretrained keeps and ignores.
struct ElectraConfig {
  lmkit::models::BertConfig bert;  ///< the encoder's keys (hidden_size, layers, heads, dropout, ...)
  int64_t embedding_size = 128;
  /// generator_size: the generator's hidden size, intermediate size and heads as a fraction
  /// of the discriminator's (Clark et al.: 1/4); 0: no generator (HF's ElectraForPreTraining).
  double generator_size = 0;
  double rtd_weight = 50;  ///< rtd_weight: λ of the loss mlm + λ·rtd
  ElectraHead head = ElectraHead::kPreTraining;

  /// The generator's config: this one's sizes times generator_size, the same embeddings.
  ElectraConfig generator() const;

  static ElectraConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class ElectraImpl : public lmkit::models::Model {
 public:
  /// `embedder`: the model whose embeddings this one shares (the generator shares the
  /// discriminator's word, position and token-type embeddings and their LayerNorm).
  explicit ElectraImpl(ElectraConfig config, ElectraImpl* embedder = nullptr);

  lmkit::Output forward(const lmkit::Batch& batch) override;
  std::string model_type() const override { return "electra"; }
  std::string architecture() const override;
  Json config_json() const override { return config.to_json(); }
  std::vector<lmkit::models::HfTensor> hf_tensors() override;
  void check_batch(const lmkit::Batch& batch) const override;
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "electra."; }
  int64_t vocab_size() const override { return config.bert.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override;
  std::vector<std::string> metric_names() const override;
  std::vector<std::pair<std::string, int64_t>> loss_targets(const lmkit::Batch& batch) const override;
  std::vector<std::pair<std::string, Model*>> companions() override;

  /// Encoder output (B, T, hidden_size).
  at::Tensor encode(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& token_type_ids,
                    std::vector<at::Tensor>* hidden_states = nullptr);
  /// The generator's vocabulary logits for hidden rows (..., H) -> (..., V).
  at::Tensor generator_logits(const at::Tensor& hidden);
  void reset_parameters();

  ElectraConfig config;
  torch::nn::Embedding word_embeddings{nullptr};        ///< (V, E)
  lmkit::nn::LearnedPositions position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};
  lmkit::nn::Norm embeddings_norm{nullptr};
  torch::nn::Linear embeddings_project{nullptr};        ///< E -> H, when they differ
  torch::nn::ModuleList layers{nullptr};                ///< BERT's encoder layers
  torch::nn::Linear discriminator_dense{nullptr}, discriminator_prediction{nullptr};  ///< H -> H -> 1
  torch::nn::Linear generator_dense{nullptr};           ///< H -> E
  lmkit::nn::Norm generator_norm{nullptr};
  at::Tensor generator_bias;                            ///< (V); the weight is word_embeddings'
  torch::nn::Linear classifier_dense{nullptr}, classifier_out{nullptr};
  lmkit::models::TokenClassifier token_classifier{nullptr};
  std::shared_ptr<ElectraImpl> generator;               ///< pretraining with the electra objective

 private:
  void discriminate(const lmkit::Batch& batch, lmkit::Output& out);
  void replaced_token_detection(const lmkit::Batch& batch, lmkit::Output& out);
  bool owns_embeddings_ = true;
  void generate_logits(const lmkit::Batch& batch, lmkit::Output& out);
  void classify(const lmkit::Batch& batch, lmkit::Output& out);
};
TORCH_MODULE(Electra);

/// The family descriptor the plugin registers.
lmkit::models::Family electra_family();

}  // namespace electra
