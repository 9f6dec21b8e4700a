// What the decoder-only families (GPT-2, Llama, Mistral, BLOOM) share: their four HF
// classes, the heads on their final hidden states (the causal LM head and loss, the last
// real token a sequence classifier reads, the token classifier), the decoding session,
// the batch check and the config keys of the heads and special tokens. A family is a
// DecoderModel with its own body (decode()) and its own config fields.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/batch.h"
#include "lmkit/core/config_table.h"
#include "lmkit/models/architectures.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/model.h"
#include "lmkit/models/token_classifier.h"

namespace lmkit::models {

enum class DecoderHead {
  kNone,                    ///< PrefixModel: last_hidden_state
  kLmHead,                  ///< the causal LM (GPT2LMHeadModel, LlamaForCausalLM, ...)
  kSequenceClassification,  ///< PrefixForSequenceClassification: last real token -> score (no bias)
  kTokenClassification,     ///< PrefixForTokenClassification: every token -> dropout -> linear, labels not shifted
};

/// A decoder-only family's four HF classes: PREFIX + `lm_class` (the default, e.g.
/// "LMHeadModel"), PREFIX + "Model", "ForSequenceClassification" and "ForTokenClassification".
ArchitectureTable<DecoderHead> decoder_architectures(const std::string& prefix, const std::string& lm_class);

/// The causal LM on out.last_hidden_state (B, T, D) with the head matrix `head_weight`
/// (V, D): out.logits when `full_logits` or without labels, and with labels out.loss,
/// position t predicting labels[t + 1]; the training path projects only the rows that
/// carry a loss, in chunks (linear_cross_entropy).
void causal_lm_head(Output& out, const Batch& batch, const at::Tensor& head_weight, bool full_logits);

/// The last real token of each row of hidden (B, T, D), from the attention mask (right
/// padding; HF finds it through pad_token_id): (B, D).
at::Tensor last_token_rows(const at::Tensor& hidden, const Batch& batch);

/// The head a decoder-only model has on out.last_hidden_state (B, T, D): the causal LM
/// when `lm_weight` (V, D) is defined, else the sequence classifier `score` on each row's
/// last real token, else the token classifier, each with its loss when labels are given.
void apply_decoder_head(Output& out, const Batch& batch, const at::Tensor& lm_weight, bool full_logits,
                        torch::nn::Linear& score, TokenClassifier& token_classifier);

/// A decoder-only model's batch: input_ids and attention_mask (no token types,
/// decoder inputs or extras but `reads`), ids within `vocab_size`, and labels for its head: a tag per
/// token (`token_tags`), a class per row (`per_row`), or next tokens.
/// `reads`: the extras it takes (packed documents).
void check_decoder_batch(const Batch& batch, const std::string& architecture, int64_t vocab_size, bool token_tags,
                         bool per_row, int64_t num_labels, const std::vector<std::string>& reads = {});

/// What a DecoderModel's heads are built from (its config's keys).
struct DecoderHeadOptions {
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_labels = 2;
  bool tie_word_embeddings = true;  ///< the LM head is the token embedding
  double classifier_dropout = 0.1;  ///< the token classifier's
  std::string classifier_name = "classifier";  ///< HF's name of the token classifier ("score" in Llama)
};

/// A decoder-only model: a body (decode(), the family's) under one of the four heads.
class DecoderModel : public Model {
 public:
  DecoderModel(ArchitectureTable<DecoderHead> architectures, DecoderHead head, GenerationSpec generation)
      : architectures_(std::move(architectures)), head_(head), generation_(generation) {}

  Output forward(const Batch& batch) override;
  std::string architecture() const override { return architectures_.name(head_); }
  bool shifted_labels() const override { return head_ == DecoderHead::kLmHead; }
  bool takes_documents() const override { return true; }
  int64_t first_position() const override { return 0; }
  void check_batch(const Batch& batch) const override;
  int64_t vocab_size() const override { return generation_.vocab_size; }
  bool hf_ignorable(const std::string& name) const override { return name == "lm_head.weight" && !lm_head; }
  GenerationSpec generation_spec() const override { return generation_; }
  std::unique_ptr<DecodingSession> start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                  bool use_cache) override;

  /// Final hidden states (B, T, D), the final norm applied. With `caches`, input_ids
  /// holds only new tokens; positions continue after the cached ones.
  /// `packing`: documents packed into the rows (training and forward only, never with caches).
  virtual at::Tensor decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                            std::vector<nn::LayerCache>* caches = nullptr,
                            std::vector<at::Tensor>* hidden_states = nullptr, const Packing& packing = {}) = 0;
  /// The token embedding (V, D), which a tied LM head reuses.
  virtual const at::Tensor& token_embedding() const = 0;
  /// Vocabulary logits for hidden rows (..., D) -> (..., V).
  at::Tensor lm_logits(const at::Tensor& hidden);

  torch::nn::Linear lm_head{nullptr};         ///< (V, D), only when not tied to the embedding
  torch::nn::Linear score{nullptr};           ///< (num_labels, D), no bias
  TokenClassifier token_classifier{nullptr};  ///< kTokenClassification

 protected:
  /// Registers the modules of the head (after the body's, HF's order).
  void build_head(const DecoderHeadOptions& options);
  /// The head's tensors under HF's names (after the body's).
  void add_head_tensors(std::vector<HfTensor>& t);
  /// "" for PrefixModel, else `prefix` ("transformer.", "model."): where HF puts the body.
  std::string body_prefix(const std::string& prefix) const { return head_ == DecoderHead::kNone ? "" : prefix; }

 private:
  ArchitectureTable<DecoderHead> architectures_;
  DecoderHead head_;
  GenerationSpec generation_;
  int64_t num_labels_ = 2;
  std::string classifier_name_ = "classifier";
};

/// The config keys of the heads and special tokens, alike in every decoder config C:
/// bos/eos/pad_token_id (null: none), tie_word_embeddings, classifier_dropout (written for
/// the token classifier; null reads as `classifier_dropout_if_null`) and the labels.
template <class C>
std::vector<ConfigField<C>> decoder_head_fields(double classifier_dropout_if_null) {
  auto classifies = [](const C& c) {
    return c.head == DecoderHead::kSequenceClassification || c.head == DecoderHead::kTokenClassification;
  };
  auto tags = [](const C& c) { return c.head == DecoderHead::kTokenClassification && c.classifier_dropout >= 0; };
  return {fields::token_id("bos_token_id", &C::bos_token_id),
          fields::token_id("eos_token_id", &C::eos_token_id),
          fields::token_id("pad_token_id", &C::pad_token_id),
          fields::flag("tie_word_embeddings", &C::tie_word_embeddings),
          fields::nullable("classifier_dropout", &C::classifier_dropout, classifier_dropout_if_null, 0.0, 1.0).when(tags),
          labels_field(&C::num_labels).when(classifies)};
}

/// Family::adopt_vocabulary of a decoder: vocab_size, eos_token_id, and pad_token_id when the
/// tokenizer has one; bos_token_id stays the config's (HF's defaults are the tokenizers' `<s>`).
void adopt_decoder_vocabulary(Json& config, int64_t vocab_size, int32_t pad_id, int32_t eos_id);

/// A decoder-only family's record: its four classes, the causal LM as objective "clm",
/// perplexity as its metric, create() reading C with `read` and building M, and
/// adopt_vocabulary setting vocab_size, eos_token_id and (a tokenizer's own) pad_token_id;
/// the family adds its positions and whatever differs.
template <class M, class C>
Family decoder_family(const std::string& model_type, const ArchitectureTable<DecoderHead>& table,
                      std::function<C(const Json&, const std::string&)> read, const std::string& tokenizer_family) {
  Family f;
  f.model_type = model_type;
  f.architectures = table.names();
  f.heads = table.heads();
  f.objectives = {{"clm", table.name(DecoderHead::kLmHead)}};
  f.tokenizer_family = tokenizer_family;
  f.metrics = {"perplexity"};
  f.create = family_creator<M, C>(table, std::move(read));
  f.adopt_vocabulary = adopt_decoder_vocabulary;
  return f;
}

/// After reading a decoder config: HF's default bos/eos ids (GPT-2's 50256, Llama's 1 and
/// 2) are no ids of a smaller vocabulary, so a config that names none has none; then every
/// special id is checked against the vocabulary.
void settle_decoder_token_ids(const Json& j, const std::string& file, int64_t vocab_size, int64_t& bos, int64_t& eos,
                              int64_t pad);

}  // namespace lmkit::models
