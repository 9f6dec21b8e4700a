// BERT (Devlin et al. 2018) as HF's BertModel and its heads: post-norm encoder,
// word + learned position + token-type embeddings, exact GELU, LayerNorm eps 1e-12.
// RoBERTa (Liu et al. 2019) is the same model with config.model_type "roberta"
// (roberta.h): positions counted from padding_idx + 1 over the non-padding tokens, an
// LM head named lm_head, and a two-layer classification head on <s> instead of the pooler.
// Longformer (Beltagy et al. 2020) is RoBERTa's model with model_type "longformer"
// (longformer.h): local attention within attention_window and global tokens. BigBird
// (Zaheer et al. 2020) is BERT's with model_type "big_bird" (big_bird.h): block-sparse attention.
#pragma once

#include <functional>
#include <vector>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/config_table.h"
#include "lmkit/models/architectures.h"
#include "lmkit/models/model.h"
#include "lmkit/models/question_answering.h"
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
  kQuestionAnswering,       ///< BertForQuestionAnswering: start and end logits per token, no pooler
};

/// HF's BertConfig keys (RobertaConfig's and LongformerConfig's too, with their defaults).
struct BertConfig {
  std::string model_type = "bert";  ///< bert, roberta, longformer or big_bird
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
  /// Self-attention (BERT, RoBERTa): a registered attention (nn/attention_kernel.h): "full",
  /// "linformer" (Wang et al. 2020), "relative" (Shaw et al. 2018), a plugin's. Longformer and
  /// BigBird choose their own from model_type and attention_type (encoder_attention).
  std::string attention = "full";
  /// The attention's own keys ({"linformer_k": 256, "linformer_sharing": "headwise"}), each read
  /// and written as a top-level key of config.json; absent ones take the attention's defaults.
  Json attention_fields = Json::object();
  /// Longformer's windows: each query sees attention_window / 2 keys either side. One value
  /// for every layer (HF's int) or one a layer.
  std::vector<int64_t> attention_window = {512};
  int64_t sep_token_id = -1;  ///< Longformer's and BigBird's (HF's question-answering head reads it); -1: none
  /// BigBird's attention: "block_sparse" (global first and last blocks, a sliding window of
  /// three blocks, num_random_blocks random ones, each of block_size positions) or "original_full".
  std::string attention_type = "block_sparse";
  int64_t block_size = 64;
  int64_t num_random_blocks = 3;
  int64_t span_boundary_max_targets = 20;     ///< SpanBERT's head: relative positions (tokens of a span it predicts)
  int64_t span_boundary_position_size = 200;  ///< and the width of their embedding
  BertHead head = BertHead::kPreTraining;

  static const ConfigTable<BertConfig>& table();
  /// The keys `j` holds over `defaults` (RoBERTa reads BERT's keys over its own defaults).
  static BertConfig from_json(const Json& j, const std::string& file, BertConfig defaults);
  static BertConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

/// RoBERTa's positions, counted from padding_idx + 1: RoBERTa and Longformer (encoder_heads.cpp).
bool roberta_positions(const BertConfig& config);

class BertImpl : public Model {
 public:
  explicit BertImpl(BertConfig config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return config.model_type; }
  std::string architecture() const override;
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override;
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override;
  std::vector<std::pair<std::string, int64_t>> loss_targets(const Batch& batch) const override;
  std::vector<std::string> metric_names() const override {
    return config.head == BertHead::kPreTraining ? std::vector<std::string>{"nsp_accuracy"} : std::vector<std::string>{};
  }
  int64_t vocab_size() const override { return config.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override;
  /// Full attention only: Longformer's windows, BigBird's blocks and Linformer's projections
  /// mix positions across documents.
  bool takes_documents() const override;
  int64_t first_position() const override;

  /// Encoder output (B, T, D) for ids (B, T); mask and token types may be undefined.
  /// Longformer's global tokens: `global_attention_mask` (B, T), 1 where a token is global.
  /// `packing`: documents packed into the rows (takes_documents()). `random_blocks`: BigBird's,
  /// one (H, nb − 2, r) a layer (kBigBirdRandomBlocks, a test hook: HF's draws); undefined:
  /// drawn (training) or the first block (eval).
  at::Tensor encode(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& token_type_ids,
                    std::vector<at::Tensor>* hidden_states = nullptr, const at::Tensor& global_attention_mask = {},
                    const Packing& packing = {}, const at::Tensor& random_blocks = {});
  /// Position ids (B, T): arange(T) for BERT; RoBERTa's (HF's create_position_ids_from_input_ids):
  /// padding_idx + the running count of non-padding tokens, padding at padding_idx.
  at::Tensor position_ids(const at::Tensor& input_ids) const;
  /// Longest input: max_position_embeddings (RoBERTa, Longformer: less padding_idx + 1, 512 for roberta-base's 514).
  int64_t max_length() const;
  /// MLM logits for hidden rows (..., D) -> (..., V): transform, then the tied decoder.
  at::Tensor mlm_logits(const at::Tensor& hidden);
  /// The MLM head's transform (dense, activation, norm) before the vocabulary projection.
  at::Tensor mlm_transform(const at::Tensor& hidden);
  /// Longformer's global tokens of a batch: its global_attention_mask, else (the sequence
  /// classifier, as HF's) the first token of every row, or (question answering) the question's
  /// tokens, those before the first separator; undefined for the other models.
  at::Tensor global_tokens(const Batch& batch) const;
  /// Re-initialises every weight as HF does (N(0, initializer_range), zero biases and padding rows, unit norms).
  void reset_parameters();

  BertConfig config;
  /// NSP's term ("nsp"), logits and, in eval mode, accuracy.
  void next_sentence(const Batch& batch, Output& out);
  /// The sequence classifier: BERT's pooled [CLS] -> dropout -> linear; RoBERTa's `<s>` ->
  /// dropout -> dense -> tanh -> dropout -> out_proj.
  void classify(const Batch& batch, Output& out);

  torch::nn::Embedding word_embeddings{nullptr};        ///< (V, D), tied to the MLM decoder
  nn::LearnedPositions absolute_positions{nullptr};     ///< BERT's (max_position_embeddings, D)
  torch::nn::Embedding position_embeddings{nullptr};    ///< RoBERTa's, padding_idx = pad
  torch::nn::Embedding token_type_embeddings{nullptr};  ///< (type_vocab_size, D)
  nn::Norm embeddings_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};                ///< num_hidden_layers x TransformerLayer (post-norm)
  torch::nn::Linear pooler{nullptr};                    ///< (D, D), tanh; BERT's kNone, kPreTraining, classifier; RoBERTa's kNone
  torch::nn::Linear mlm_dense{nullptr};                 ///< (D, D) transform before the decoder
  nn::Norm mlm_norm{nullptr};
  at::Tensor mlm_bias;                                  ///< (V) decoder bias
  torch::nn::Linear nsp{nullptr};                       ///< (2, D) on the pooled output
  torch::nn::Linear classifier{nullptr};                ///< BERT's (num_labels, D)
  torch::nn::Linear classifier_dense{nullptr}, classifier_out{nullptr};  ///< RoBERTa's and BigBird's
  SpanBoundaryHead span_boundary{nullptr};              ///< kSpanPreTraining
  TokenClassifier token_classifier{nullptr};            ///< kTokenClassification
  QuestionAnsweringHead qa_head{nullptr};               ///< kQuestionAnswering

 private:
  /// RoBERTa's embeddings and heads: RoBERTa and Longformer.
  bool roberta() const { return roberta_positions(config); }
  bool big_bird() const { return config.model_type == "big_bird"; }
  void build_heads();
};
TORCH_MODULE(Bert);

/// The classes of `model_type` (bert, roberta, longformer or big_bird) and the head each builds.
const ArchitectureTable<BertHead>& bert_architectures(const std::string& model_type);

struct Family;
/// The bert family (family.h): its architectures, objectives and how to build it.
Family bert_family();

}  // namespace lmkit::models
