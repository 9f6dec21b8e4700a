// What the decoder-only families (GPT-2, Llama, Mistral, BLOOM) put on their final
// hidden states: the causal LM head and loss, the last real token a sequence classifier
// reads, the token classifier, the decoding session and the batch check.
#pragma once

#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/model.h"
#include "lmkit/models/token_classifier.h"

namespace lmkit::models {

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

/// The decoding session of a decoder-only LM M with decode(ids, mask, caches) and
/// lm_logits(hidden): the prompt is the first step's input.
template <typename M>
std::unique_ptr<DecodingSession> decoder_only_session(M& model, bool use_cache) {
  return make_decoding_session(
      [&model](const at::Tensor& ids, std::vector<nn::LayerCache>* caches, const at::Tensor&, const at::Tensor&) {
        return model.decode(ids, at::Tensor(), caches);
      },
      [&model](const at::Tensor& h) { return model.lm_logits(h); }, {}, {}, use_cache);
}

/// A decoder-only model's batch: input_ids and attention_mask only (no token types,
/// decoder inputs or extras), ids within `vocab_size`, and labels for its head: a tag per
/// token (`token_tags`), a class per row (`per_row`), or next tokens.
void check_decoder_batch(const Batch& batch, const std::string& architecture, int64_t vocab_size, bool token_tags,
                         bool per_row, int64_t num_labels);

}  // namespace lmkit::models
