// What every model's check_batch() is made of: ids, labels and shapes, each
// refusal an InputError naming the tensor (exit 2 in the apps).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lmkit/core/batch.h"
#include "lmkit/core/config.h"

namespace lmkit::models {

/// Throws InputError unless the tensor holds int64 or int32 ids (what an embedding
/// takes), every one in [0, limit). An undefined tensor passes.
void check_token_ids(const at::Tensor& ids, int64_t limit, const std::string& what);
/// As check_token_ids for a required (batch, length) matrix with both sizes >= 1.
void check_token_matrix(const at::Tensor& ids, int64_t limit, const std::string& what);
/// Token targets of a loss: int64 ids in [0, limit), or -100 (ignored).
void check_labels(const at::Tensor& labels, int64_t limit, const std::string& what);
/// Throws InputError unless `t` is undefined or has the shape `like` has.
void check_same_shape(const at::Tensor& t, const at::Tensor& like, const std::string& what, const std::string& like_what);
/// Labels of an encoder or decoder-only model: one class per row for a
/// classifier head, else token labels shaped like input_ids (ids or -100).
void check_input_labels(const Batch& batch, bool classifier, int64_t num_labels, int64_t vocab_size);
/// The decoder side of an encoder-decoder batch (T5, the Transformer):
/// decoder_input_ids and/or labels of shape [input_ids' batch, length >= 1], ids
/// in [0, vocab_size), labels also -100, decoder_attention_mask shaped alike.
void check_decoder_inputs(const Batch& batch, int64_t vocab_size, const std::string& model);
/// The inputs of a model that reads ids and a padding mask only: input_ids (B, T) within
/// `vocab_size`, attention_mask shaped alike, no token_type_ids and no extras.
/// `reads`: the extras the model takes (check_extra_inputs).
void check_plain_inputs(const Batch& batch, int64_t vocab_size, const std::string& model,
                        const std::vector<std::string>& reads = {});
/// Packed documents (Batch::extra's kDocumentIds, kPositionIds) where a model reads them:
/// integers shaped as input_ids, positions within [0, max_positions) (0: no bound).
void check_packing(const Batch& batch, int64_t max_positions);
/// Throws InputError if `t` is defined: `model` has no use for the field `what`.
void check_unused(const at::Tensor& t, const std::string& what, const std::string& model);
/// InputError "MODEL does not take NAME" for an extra input (Batch::extra) not in `reads`.
void check_extra_inputs(const Batch& batch, const std::vector<std::string>& reads, const std::string& model);
/// One target per row (sequence classification, next-sentence prediction): shape
/// [batch], int64 class ids in [0, num_classes), or numbers when num_classes == 1.
void check_row_labels(const at::Tensor& labels, int64_t batch, int64_t num_classes, const std::string& what);

/// A config's special-token id against the vocabulary it indexes: InputError
/// "FILE: key 'KEY' = ID is outside the vocabulary (BOUND_KEY BOUND: ids 0 to BOUND-1)".
void check_config_token_id(const std::string& file, const std::string& key, int64_t id, int64_t bound,
                           const std::string& bound_key = "vocab_size");
/// A config's special-token ids, checked with check_config_token_id before any module
/// is built: `used`, the ids the family reads as it holds them (defaults included; -1:
/// none), and every other `_token_id` key the file holds as an integer (pad, bos, eos,
/// decoder_start, mask, sep, cls), which the family ignores.
void check_config_token_ids(const Json& config, const std::string& file, int64_t bound,
                            const std::vector<std::pair<std::string, int64_t>>& used,
                            const std::string& bound_key = "vocab_size");

}  // namespace lmkit::models
