#include "lmkit/models/decoder_heads.h"

#include <ATen/ATen.h>

#include "lmkit/models/checks.h"
#include "lmkit/models/losses.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

void causal_lm_head(Output& out, const Batch& batch, const at::Tensor& head_weight, bool full_logits) {
  if (full_logits || !batch.labels.defined()) out.logits = nn::linear(out.last_hidden_state, head_weight);  // (B, T, V)
  if (!batch.labels.defined()) return;
  const at::Tensor shifted = batch.labels.slice(1, 1);  // (B, T-1): position t predicts labels[t + 1]
  if (out.logits.defined()) {
    out.loss = cross_entropy(out.logits.slice(1, 0, -1), shifted);
    return;
  }
  // Without padding every position predicts: no row selection (nor its device sync).
  at::Tensor rows = out.last_hidden_state.slice(1, 0, -1), targets = shifted;
  if (batch.attention_mask.defined()) std::tie(rows, targets) = select_targets(rows, shifted);
  out.loss = linear_cross_entropy(rows, head_weight, {}, targets);
}

at::Tensor last_token_rows(const at::Tensor& hidden, const Batch& batch) {
  const int64_t b = batch.input_ids.size(0), t = batch.input_ids.size(1);
  const at::Tensor last = batch.attention_mask.defined() ? batch.attention_mask.sum(1).sub(1).clamp_min(0)
                                                         : at::full({b}, t - 1, batch.input_ids.options());
  return hidden.index({at::arange(b, last.options()), last});  // (B, D)
}

void apply_decoder_head(Output& out, const Batch& batch, const at::Tensor& lm_weight, bool full_logits,
                        torch::nn::Linear& score, TokenClassifier& token_classifier) {
  if (lm_weight.defined()) {
    causal_lm_head(out, batch, lm_weight, full_logits);
  } else if (score) {
    out.logits = score(last_token_rows(out.last_hidden_state, batch));  // (B, num_labels)
    if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
  } else if (token_classifier) {
    token_classifier->apply(out, out.last_hidden_state, batch.labels);  // labels not shifted
  }
}

void check_decoder_batch(const Batch& b, const std::string& architecture, int64_t vocab_size, bool token_tags,
                         bool per_row, int64_t num_labels) {
  check_unused(b.token_type_ids, "token_type_ids", architecture);
  check_extra_inputs(b, {}, architecture);
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture);
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture);
  check_token_matrix(b.input_ids, vocab_size, "input_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
  if (token_tags) check_token_labels(b, num_labels);
  else check_input_labels(b, per_row, num_labels, vocab_size);
}

}  // namespace lmkit::models
