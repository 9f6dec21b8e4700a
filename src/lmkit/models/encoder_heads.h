// What the BERT-style encoders (BERT, RoBERTa, SpanBERT's heads, ELECTRA's example) share:
// RoBERTa is BERT's encoder with other positions and heads, and ELECTRA BERT's with a
// narrower embedding. The layer stack a BertConfig describes and its HF names, the encoder
// pass from summed embeddings, the masked-LM head and its terms, the batch check, the
// initialisation of norms and the FLOPs count.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>

#include "lmkit/core/batch.h"
#include "lmkit/models/bert.h"
#include "lmkit/models/model.h"
#include "lmkit/models/span_boundary.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

/// The post-norm layer stack a config describes.
torch::nn::ModuleList bert_encoder_layers(const BertConfig& config);
/// The attention a config's layers run (nn/attention_kernel.h): Longformer's for model_type
/// "longformer", BigBird's block-sparse for "big_bird" with attention_type "block_sparse", else
/// the config's "attention" (full, linformer, relative, a plugin's).
std::string encoder_attention(const BertConfig& config);
/// What the encoder's mask holds besides the padding: Longformer's global tokens, packed
/// documents (B, T), BigBird's random blocks (one (H, nb − 2, r) a layer, HF's draws).
struct EncoderMaskInputs {
  at::Tensor global_attention_mask;
  at::Tensor document_ids;
  at::Tensor random_blocks;
};
/// Its HF tensors (`prefix` + "encoder.layer.N....", HF's BertLayer names).
void add_bert_encoder_tensors(std::vector<HfTensor>& out, const std::string& prefix, torch::nn::ModuleList& layers);
/// The encoder pass from summed embeddings x (B, T, D): the embeddings' norm, dropout
/// (in training), then the layers under the padding mask (an nn::AttentionMask: the bias and
/// the real keys, `extra`'s global tokens, within each packed document, BigBird's random
/// blocks); each stage's output into `hidden_states` when given.
at::Tensor run_bert_encoder(Model& model, const BertConfig& config, at::Tensor x, const at::Tensor& attention_mask,
                            nn::Norm& embeddings_norm, torch::nn::ModuleList& layers, std::vector<at::Tensor>* hidden_states,
                            const EncoderMaskInputs& extra = {});
/// The masked-LM head on out.last_hidden_state (vocabulary_head: transform, then the tied
/// `weight` and `bias`): out.logits when `full_logits` or without labels; with labels the
/// "mlm" term and loss and, with `span_boundary`, SpanBERT's "sbo".
void apply_masked_lm(Output& out, const at::Tensor& labels, bool full_logits,
                     const std::function<at::Tensor(const at::Tensor&)>& transform, const at::Tensor& weight,
                     const at::Tensor& bias, SpanBoundaryHead& span_boundary);
/// The loss terms' targets of a masked-LM batch: "mlm", then "nsp" (a row each) when
/// `next_sentence`, then "sbo" when `span`.
std::vector<std::pair<std::string, int64_t>> masked_lm_targets(const Batch& batch, bool next_sentence, bool span,
                                                               int64_t span_max_targets);
/// An encoder's batch: no decoder inputs, only `extras` beside the ids, ids within the
/// vocabularies, RoBERTa's and Longformer's at most bert_max_length, at least linformer_k with Linformer,
/// a global_attention_mask of 0s and 1s shaped like input_ids,
/// masks and token types shaped like input_ids, labels for the head (a tag per token for
/// `token_tags`, a class per row for `per_row`, else tokens). BERT's learned positions
/// refuse a longer input as they run.
void check_encoder_batch(const Batch& batch, const std::string& architecture, const BertConfig& config,
                         const std::vector<std::string>& extras, bool per_row, bool token_tags);
/// The longest input: max_position_embeddings (RoBERTa: less padding_idx + 1, whose positions
/// count from it: 512 for roberta-base's 514).
int64_t bert_max_length(const BertConfig& config);
/// The attention keys against the config: Linformer's k within max_position_embeddings,
/// Longformer's windows even and one for every layer or one a layer (InputError naming `file`).
/// `j`, the config as the file wrote it: a value the file never set is quoted as "(its default)".
void check_attention_config(const BertConfig& config, const Json& j, const std::string& file);
/// Longformer's attention_window of `layer`.
int64_t longformer_window(const BertConfig& config, int64_t layer);
/// SpanBERT's span boundary head over this encoder (span_boundary.h).
SpanBoundaryOptions span_boundary_options(const BertConfig& config);
/// The classifier heads' dropout (classifier_dropout, else hidden_dropout_prob).
double head_dropout(const BertConfig& config);
/// Forward FLOPs per token: the layers, plus an MLM head on the ~15% labelled positions.
double bert_encoder_flops_per_token(const torch::nn::ModuleList& layers, int64_t seq_len, const BertConfig& config,
                                    bool mlm_head, const SpanBoundaryHead& span_boundary = nullptr);

}  // namespace lmkit::models
