// The currency between data and models: a plain struct of named tensors.
// It lives in core/ so that data produces it and models consume it without
// either knowing the other (docs/architecture.md, Data flow).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lmkit {

/// Batch-first, int64 ids. Fields a task does not use stay undefined tensors.
struct Batch {
  at::Tensor input_ids;               ///< (B, T) token ids
  at::Tensor attention_mask;          ///< (B, T) 1 = real token, 0 = padding
  at::Tensor token_type_ids;          ///< (B, T) segment ids (BERT)
  at::Tensor labels;                  ///< (B, T) token targets, -100 = ignored; or (B) class ids / (B) floats
  at::Tensor decoder_input_ids;       ///< (B, S) decoder inputs (seq2seq)
  at::Tensor decoder_attention_mask;  ///< (B, S)
  /// Inputs beyond the fields above, by name: an objective's own kind of label, which
  /// the objective makes and the model that reads it checks for (kNextSentenceLabel
  /// below; a plugin's objective and family agree on their own). A model refuses a name
  /// it does not read.
  std::map<std::string, at::Tensor> extra;

  /// The extra input `name`; undefined when absent.
  at::Tensor field(const std::string& name) const;
  /// Moves every defined field to `device` (non-blocking where possible).
  Batch to(const at::Device& device) const;
  /// Number of real (non-padding) input tokens, for tokens/s.
  int64_t num_tokens() const;
  /// Its rows: input_ids' (or an image model's pixel_values'); 0 for a batch with neither
  /// (a rank's empty share of the last batch).
  int64_t rows() const;
};

/// Next-sentence prediction's labels in Batch::extra: (B) int64, 0 = segment B follows A,
/// 1 = B is random (HF's name). Named here, where data/ (the objective that makes them)
/// and models/ (BERT, which reads them) meet without knowing each other.
inline constexpr const char* kNextSentenceLabel = "next_sentence_label";
/// Longformer's global tokens in Batch::extra: (B, T) 0 (local attention) or 1 (global), HF's name.
inline constexpr const char* kGlobalAttentionMask = "global_attention_mask";
/// Documents packed into one row (document masking) in Batch::extra: (B, T) int64, a token
/// attends only to keys of the same id (its document), as Megatron-LM's reset_attention_mask;
/// padding may carry any id (the attention mask hides it). lmkit's name; HF has none.
inline constexpr const char* kDocumentIds = "document_ids";
/// Each token's position in Batch::extra, HF's position_ids: (B, T) int64, the row of the
/// position table (or the rotary angle) it takes; packed documents restart theirs at each
/// document (counted from the model's Model::first_position()).
inline constexpr const char* kPositionIds = "position_ids";
/// Extractive question answering's targets in Batch::extra: (B) int64, the token index of
/// each row's answer start and end (HF's names; 0, the first token, for no answer in the row;
/// beyond the row: ignored, as HF clamps them to T and ignores T).
inline constexpr const char* kStartPositions = "start_positions";
inline constexpr const char* kEndPositions = "end_positions";
/// Images in Batch::extra: (B, channels, height, width) float, HF's name (ViT, MAE).
inline constexpr const char* kPixelValues = "pixel_values";
/// MAE's per-patch noise in Batch::extra: (B, patches) float; the patches of the smallest values
/// are kept (HF's `noise`). The MAE objective draws it per example from its seed, so masks repeat.
inline constexpr const char* kMaeNoise = "noise";
/// BigBird's random blocks in Batch::extra, a test hook: (layers, heads, nb − 2, r) int64,
/// the blocks HF drew, used instead of lmkit's draws (nn::MultiHeadAttentionImpl::random_blocks).
inline constexpr const char* kBigBirdRandomBlocks = "bigbird_random_blocks";

/// One term of a model's loss (BERT's "mlm" and "nsp", SpanBERT's "sbo"): its mean
/// over its targets and their number. The trainer weights each term by its share of
/// the step's targets and evaluation sums terms by name; neither knows their meaning.
struct LossTerm {
  std::string name;
  at::Tensor mean;     ///< () mean over the term's targets
  at::Tensor targets;  ///< () number of targets (int64, on the model's device)
};

/// A figure a model reports besides its loss (BERT's "nsp_accuracy"): `sum` over
/// `count` items; evaluation sums both by name over batches and divides.
struct Metric {
  std::string name;
  at::Tensor sum;  ///< () on the model's device
  double count = 0;
};

/// What every task model returns. `loss` is defined when labels were given.
struct Output {
  at::Tensor loss;                      ///< () the loss HF reports (the sum of the terms' means)
  at::Tensor logits;                    ///< task logits (e.g. (B, T, V) or (B, num_labels))
  at::Tensor last_hidden_state;         ///< (B, T, D) final encoder/decoder states
  at::Tensor pooler_output;             ///< (B, D) BERT pooled [CLS]
  at::Tensor encoder_last_hidden_state; ///< (B, T, D) encoder–decoder models
  /// The terms of `loss` when it has more than one (empty: `loss` is one term over the
  /// targets models::count_targets() counts). The first is the language-modelling term.
  std::vector<LossTerm> terms;
  std::vector<Metric> metrics;          ///< filled in eval mode only
  /// Further outputs under HF's names (BERT's "seq_relationship_logits"), for lmkit-forward.
  std::vector<std::pair<std::string, at::Tensor>> named;
  /// With Model::output_hidden_states: the embedding output, then each layer's
  /// (for pre-norm models the last entry has the final norm applied, as in HF).
  /// Encoder–decoder models put the decoder's here and the encoder's below.
  std::vector<at::Tensor> hidden_states;
  std::vector<at::Tensor> encoder_hidden_states;

  /// The named output `name`; undefined when absent.
  at::Tensor get(const std::string& name) const;
  /// The term `name`; nullptr when absent.
  const LossTerm* term(const std::string& name) const;
};

}  // namespace lmkit
