// The currency between data and models: a plain struct of named tensors.
// It lives in core/ so that data produces it and models consume it without
// either knowing the other (docs/architecture.md, Data flow).
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace lmkit {

/// Batch-first, int64 ids. Fields a task does not use stay undefined tensors.
struct Batch {
  at::Tensor input_ids;               ///< (B, T) token ids
  at::Tensor attention_mask;          ///< (B, T) 1 = real token, 0 = padding
  at::Tensor token_type_ids;          ///< (B, T) segment ids (BERT)
  at::Tensor labels;                  ///< (B, T) token targets, -100 = ignored; or (B) class ids / (B) floats
  at::Tensor next_sentence_label;     ///< (B) 0 = B follows A, 1 = B is random (BERT NSP)
  at::Tensor decoder_input_ids;       ///< (B, S) decoder inputs (seq2seq)
  at::Tensor decoder_attention_mask;  ///< (B, S)

  /// Moves every defined field to `device` (non-blocking where possible).
  Batch to(const at::Device& device) const;
  /// Number of real (non-padding) input tokens, for tokens/s.
  int64_t num_tokens() const;
};

/// What every task model returns. `loss` is defined when labels were given.
struct Output {
  at::Tensor loss;                      ///< () mean loss over non-ignored targets
  at::Tensor logits;                    ///< task logits (e.g. (B, T, V) or (B, num_labels))
  at::Tensor last_hidden_state;         ///< (B, T, D) final encoder/decoder states
  at::Tensor pooler_output;             ///< (B, D) BERT pooled [CLS]
  at::Tensor seq_relationship_logits;   ///< (B, 2) BERT NSP
  at::Tensor encoder_last_hidden_state; ///< (B, T, D) encoder–decoder models
  at::Tensor mlm_loss, nsp_loss;        ///< BERT pretraining components
  /// With Model::output_hidden_states: the embedding output, then each layer's
  /// (for pre-norm models the last entry has the final norm applied, as in HF).
  /// Encoder–decoder models put the decoder's here and the encoder's below.
  std::vector<at::Tensor> hidden_states;
  std::vector<at::Tensor> encoder_hidden_states;
};

}  // namespace lmkit
