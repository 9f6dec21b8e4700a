// What the decoder-only families (GPT-2, Llama) put on their final hidden states:
// the causal LM head and loss, the last real token a sequence classifier reads, and
// the batch check every decoder-only model makes.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "lmkit/core/batch.h"

namespace lmkit::models {

/// The causal LM on out.last_hidden_state (B, T, D) with the head matrix `head_weight`
/// (V, D): out.logits when `full_logits` or without labels, and with labels out.loss,
/// position t predicting labels[t + 1]; the training path projects only the rows that
/// carry a loss, in chunks (linear_cross_entropy).
void causal_lm_head(Output& out, const Batch& batch, const at::Tensor& head_weight, bool full_logits);

/// The last real token of each row of hidden (B, T, D), from the attention mask (right
/// padding; HF finds it through pad_token_id): (B, D).
at::Tensor last_token_rows(const at::Tensor& hidden, const Batch& batch);

/// A decoder-only model's batch: input_ids and attention_mask only (no token types,
/// decoder inputs or extras), ids within `vocab_size`, and labels for its head: a tag per
/// token (`token_tags`), a class per row (`per_row`), or next tokens.
void check_decoder_batch(const Batch& batch, const std::string& architecture, int64_t vocab_size, bool token_tags,
                         bool per_row, int64_t num_labels);

}  // namespace lmkit::models
