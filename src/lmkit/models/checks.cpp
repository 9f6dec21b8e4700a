#include "lmkit/models/checks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "lmkit/core/error.h"

namespace lmkit::models {

namespace {

std::string dtype_of(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

// Ids feed an embedding (int64 or int32); targets feed a loss (int64 only).
void check_integer_dtype(const at::Tensor& t, bool int32_ok, const std::string& what) {
  const auto type = t.scalar_type();
  if (type == at::kLong || (int32_ok && type == at::kInt)) return;
  throw InputError(what + " must hold " + (int32_ok ? "int64 or int32" : "int64") + " ids, not " + dtype_of(t));
}

void check_range(const at::Tensor& ids, int64_t limit, const std::string& what) {
  if (ids.numel() == 0) return;
  // One pass and, on a GPU, one copy to the host (min() and max() would be two passes and two syncs each forward).
  const auto [min, max] = at::aminmax(ids);
  const at::Tensor both = at::stack({min, max}).to(at::kCPU, at::kLong).contiguous();
  const int64_t lo = both.data_ptr<int64_t>()[0], hi = both.data_ptr<int64_t>()[1];
  if (lo < 0 || hi >= limit) {
    throw InputError(what + " holds id " + std::to_string(lo < 0 ? lo : hi) + " outside [0, " + std::to_string(limit) + ")");
  }
}

}  // namespace

void check_token_ids(const at::Tensor& ids, int64_t limit, const std::string& what) {
  if (!ids.defined()) return;
  check_integer_dtype(ids, /*int32_ok=*/true, what);
  check_range(ids, limit, what);
}

void check_token_matrix(const at::Tensor& ids, int64_t limit, const std::string& what) {
  if (!ids.defined() || ids.dim() != 2 || ids.size(0) == 0 || ids.size(1) == 0) {
    throw InputError(what + " must have shape [batch, length] with batch and length >= 1, got " +
                     (ids.defined() ? c10::str(ids.sizes()) : std::string("none")));
  }
  check_token_ids(ids, limit, what);
}

void check_labels(const at::Tensor& labels, int64_t limit, const std::string& what) {
  if (!labels.defined()) return;
  check_integer_dtype(labels, /*int32_ok=*/false, what);
  check_range(labels.masked_fill(labels.eq(-100), 0), limit, what + " (other than -100)");
}

void check_same_shape(const at::Tensor& t, const at::Tensor& like, const std::string& what, const std::string& like_what) {
  if (t.defined() && like.defined() && t.sizes() != like.sizes()) {
    throw InputError(what + " has shape " + c10::str(t.sizes()) + " but " + like_what + " has " + c10::str(like.sizes()));
  }
}

void check_input_labels(const Batch& b, bool classifier, int64_t num_labels, int64_t vocab_size) {
  if (classifier) {
    check_row_labels(b.labels, b.input_ids.size(0), num_labels, "labels");
  } else {
    check_same_shape(b.labels, b.input_ids, "labels", "input_ids");
    check_labels(b.labels, vocab_size, "labels");
  }
}

void check_decoder_inputs(const Batch& b, int64_t vocab_size, const std::string& model) {
  check_input(b.decoder_input_ids.defined() || b.labels.defined(), model + " needs decoder_input_ids or labels");
  if (b.decoder_input_ids.defined()) check_token_matrix(b.decoder_input_ids, vocab_size, "decoder_input_ids");
  check_labels(b.labels, vocab_size, "labels");
  const at::Tensor& targets = b.decoder_input_ids.defined() ? b.decoder_input_ids : b.labels;
  const std::string name = b.decoder_input_ids.defined() ? "decoder_input_ids" : "labels";
  if (targets.dim() != 2 || targets.size(0) != b.input_ids.size(0) || targets.size(1) == 0) {
    throw InputError(name + " must have shape [" + std::to_string(b.input_ids.size(0)) +
                     ", length] (input_ids' batch, length >= 1), got " + c10::str(targets.sizes()));
  }
  check_same_shape(b.labels, b.decoder_input_ids, "labels", "decoder_input_ids");
  check_same_shape(b.decoder_attention_mask, targets, "decoder_attention_mask", name);
}

void check_plain_inputs(const Batch& b, int64_t vocab_size, const std::string& model,
                        const std::vector<std::string>& reads) {
  check_unused(b.token_type_ids, "token_type_ids", model);
  check_extra_inputs(b, reads, model);
  check_token_matrix(b.input_ids, vocab_size, "input_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
}

void check_packing(const Batch& b, int64_t max_positions) {
  const at::Tensor documents = b.field(kDocumentIds), positions = b.field(kPositionIds);
  check_same_shape(documents, b.input_ids, kDocumentIds, "input_ids");
  check_same_shape(positions, b.input_ids, kPositionIds, "input_ids");
  if (documents.defined()) check_integer_dtype(documents, /*int32_ok=*/true, kDocumentIds);
  if (positions.defined()) {
    check_integer_dtype(positions, /*int32_ok=*/true, kPositionIds);
    check_range(positions, max_positions > 0 ? max_positions : std::numeric_limits<int64_t>::max(),
                std::string(kPositionIds) + (max_positions > 0 ? " (the model's positions)" : ""));
  }
}

void check_unused(const at::Tensor& t, const std::string& what, const std::string& model) {
  if (t.defined()) throw InputError(model + " does not take " + what);
}

void check_extra_inputs(const Batch& batch, const std::vector<std::string>& reads, const std::string& model) {
  for (const auto& [name, t] : batch.extra) {
    if (t.defined() && std::find(reads.begin(), reads.end(), name) == reads.end()) {
      throw InputError(model + " does not take " + name);
    }
  }
}

void check_row_labels(const at::Tensor& labels, int64_t batch, int64_t num_classes, const std::string& what) {
  if (!labels.defined()) return;
  if (labels.dim() != 1 || labels.size(0) != batch) {
    throw InputError(what + " must have shape [" + std::to_string(batch) + "] (one class per row), got " +
                     c10::str(labels.sizes()));
  }
  if (num_classes == 1) {  // regression: a float target per row
    if (!at::isFloatingType(labels.scalar_type()) && !at::isIntegralType(labels.scalar_type(), false)) {
      throw InputError(what + " of a regression head must be numbers, not " + dtype_of(labels));
    }
    return;
  }
  check_integer_dtype(labels, /*int32_ok=*/false, what);
  check_range(labels, num_classes, what);
}

void check_config_token_id(const std::string& file, const std::string& key, int64_t id, int64_t bound,
                           const std::string& bound_key) {
  if (id >= 0 && id < bound) return;
  throw InputError(file + ": key '" + key + "' = " + std::to_string(id) + " is outside the vocabulary (" + bound_key + " " +
                   std::to_string(bound) + ": ids 0 to " + std::to_string(bound - 1) + ")");
}

void check_config_token_ids(const Json& config, const std::string& file, int64_t bound,
                            const std::vector<std::pair<std::string, int64_t>>& used, const std::string& bound_key) {
  for (const auto& [key, id] : used) {
    if (id != -1) check_config_token_id(file, key, id, bound, bound_key);
  }
  if (!config.is_object()) return;
  for (const char* name : {"pad", "bos", "eos", "decoder_start", "mask", "sep", "cls"}) {
    const std::string key = std::string(name) + "_token_id";
    const auto it = config.find(key);
    const bool read = std::any_of(used.begin(), used.end(), [&](const auto& u) { return u.first == key; });
    if (read || it == config.end() || !it->is_number_integer()) continue;  // read above, absent, null (none)
    // An unsigned id past int64's range is past any vocabulary too.
    const int64_t id = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : it->get<int64_t>();
    check_config_token_id(file, key, id, bound, bound_key);
  }
}

}  // namespace lmkit::models
