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

ArchitectureTable<DecoderHead> decoder_architectures(const std::string& prefix, const std::string& lm_class) {
  return ArchitectureTable<DecoderHead>(
      {{prefix + lm_class, DecoderHead::kLmHead, kTextToTextHead},
       {prefix + "Model", DecoderHead::kNone, ""},
       {prefix + "ForSequenceClassification", DecoderHead::kSequenceClassification, kClassificationHead},
       {prefix + "ForTokenClassification", DecoderHead::kTokenClassification, kTokenClassificationHead}});
}

void DecoderModel::build_head(const DecoderHeadOptions& o) {
  const int64_t d = o.hidden_size;
  num_labels_ = o.num_labels;
  classifier_name_ = o.classifier_name;
  if (head_ == DecoderHead::kLmHead && !o.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(d, o.vocab_size).bias(false)));
  }
  if (head_ == DecoderHead::kSequenceClassification) {
    score = register_module("score", torch::nn::Linear(torch::nn::LinearOptions(d, o.num_labels).bias(false)));
  }
  if (head_ == DecoderHead::kTokenClassification) {
    token_classifier = register_module("token_classifier", TokenClassifier(d, o.num_labels, o.classifier_dropout));
  }
}

void DecoderModel::add_head_tensors(std::vector<HfTensor>& t) {
  if (lm_head) t.push_back({"lm_head.weight", lm_head->weight});
  if (score) t.push_back({"score.weight", score->weight});
  if (token_classifier) token_classifier->add_hf_tensors(t, classifier_name_);
}

at::Tensor DecoderModel::lm_logits(const at::Tensor& hidden) {
  return nn::linear(hidden, lm_head ? lm_head->weight : token_embedding());  // (..., V)
}

Output DecoderModel::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = decode(batch.input_ids, batch.attention_mask, nullptr, hs, Packing::of(batch));  // (B, T, D)
  const at::Tensor lm = head_ != DecoderHead::kLmHead ? at::Tensor() : lm_head ? lm_head->weight : token_embedding();
  apply_decoder_head(out, batch, lm, full_logits, score, token_classifier);
  return out;
}

std::unique_ptr<DecodingSession> DecoderModel::start_decoding(const at::Tensor&, const at::Tensor&, bool use_cache) {
  if (head_ != DecoderHead::kLmHead) return Model::start_decoding({}, {}, use_cache);
  // The prompt is the first step's input.
  return make_decoding_session(
      [this](const at::Tensor& ids, std::vector<nn::LayerCache>* caches, const at::Tensor&, const at::Tensor&) {
        return decode(ids, at::Tensor(), caches);
      },
      [this](const at::Tensor& h) { return lm_logits(h); }, {}, {}, use_cache);
}

void DecoderModel::check_batch(const Batch& b) const {
  std::vector<std::string> reads;
  if (takes_documents()) reads.push_back(kDocumentIds);
  if (first_position() >= 0) reads.push_back(kPositionIds);
  check_decoder_batch(b, architecture(), generation_.vocab_size, head_ == DecoderHead::kTokenClassification,
                      head_ == DecoderHead::kSequenceClassification, num_labels_, reads);
  check_packing(b, generation_.max_positions);
}

void adopt_decoder_vocabulary(Json& config, int64_t vocab_size, int32_t pad, int32_t eos) {
  config["vocab_size"] = vocab_size;
  config["eos_token_id"] = eos;
  if (pad >= 0) config["pad_token_id"] = pad;
}

void settle_decoder_token_ids(const Json& j, const std::string& file, int64_t vocab_size, int64_t& bos, int64_t& eos,
                              int64_t pad) {
  if (!j.contains("bos_token_id") && bos >= vocab_size) bos = -1;
  if (!j.contains("eos_token_id") && eos >= vocab_size) eos = -1;
  check_config_token_ids(j, file, vocab_size, {{"bos_token_id", bos}, {"eos_token_id", eos}, {"pad_token_id", pad}});
}

void check_decoder_batch(const Batch& b, const std::string& architecture, int64_t vocab_size, bool token_tags,
                         bool per_row, int64_t num_labels, const std::vector<std::string>& reads) {
  check_plain_inputs(b, vocab_size, architecture, reads);
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture);
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture);
  if (token_tags) check_token_labels(b, num_labels);
  else check_input_labels(b, per_row, num_labels, vocab_size);
}

}  // namespace lmkit::models
