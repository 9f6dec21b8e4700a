#include "lmkit/models/encoder_heads.h"

#include <ATen/ATen.h>

#include "lmkit/models/attention_config.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::models {

std::string encoder_attention(const BertConfig& c) {
  if (c.model_type == "longformer") return "longformer";
  if (c.model_type == "big_bird") return c.attention_type == "block_sparse" ? "block_sparse" : "full";
  return c.attention;
}

namespace {

// Layer i's attention settings: the attention's own keys, or Longformer's and BigBird's from theirs.
Json encoder_attention_fields(const BertConfig& c, const std::string& attention, int64_t i) {
  if (attention == "longformer") return {{"local_window", longformer_window(c, i) / 2}};
  if (attention == "block_sparse") return {{"block_size", c.block_size}, {"random_blocks", c.num_random_blocks}};
  return complete_attention_fields(attention, c.attention_fields);
}

}  // namespace

torch::nn::ModuleList bert_encoder_layers(const BertConfig& c) {
  torch::nn::ModuleList layers;
  const std::string attention = encoder_attention(c);
  auto shared = std::make_shared<nn::SharedTensors>();  // Linformer's layerwise projection
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(c.hidden_size, c.num_attention_heads, c.intermediate_size)
                                               .activation(nn::parse_activation(c.hidden_act))
                                               .norm_eps(c.layer_norm_eps)
                                               .pre_norm(false)
                                               .dropout(c.hidden_dropout_prob)
                                               .attention_dropout(c.attention_probs_dropout_prob)
                                               .attention(attention)
                                               .attention_fields(encoder_attention_fields(c, attention, i))
                                               .layer(i)
                                               .max_length(c.max_position_embeddings)
                                               .shared(shared)));
  }
  return layers;
}

void add_bert_encoder_tensors(std::vector<HfTensor>& t, const std::string& prefix, torch::nn::ModuleList& layers) {
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = prefix + "encoder.layer." + std::to_string(i) + ".";
    add_fused_linear(t, {p + "attention.self.query", p + "attention.self.key", p + "attention.self.value"},
                     layer->self_attn->qkv);
    add_linear(t, p + "attention.output.dense", layer->self_attn->out);
    add_norm(t, p + "attention.output.LayerNorm", layer->self_attn_norm);
    add_linear(t, p + "intermediate.dense", layer->ffn->in);
    add_linear(t, p + "output.dense", layer->ffn->out);
    add_norm(t, p + "output.LayerNorm", layer->ffn_norm);
    if (auto q_global = layer->self_attn->kernel_linear("q_global")) {  // Longformer's global projections
      add_linear(t, p + "attention.self.query_global", q_global);
      auto kv_global = layer->self_attn->kernel_linear("kv_global");
      add_fused_linear(t, {p + "attention.self.key_global", p + "attention.self.value_global"}, kv_global);
    }
    // The kernel's own tensors on this layer (Linformer's where it owns them, Shaw's tables, a plugin's).
    add_kernel_tensors(t, p + "attention.self.", *layer->self_attn);
  }
}


double bert_encoder_flops_per_token(const torch::nn::ModuleList& layers, int64_t seq_len, const BertConfig& config,
                                    bool mlm_head, const SpanBoundaryHead& span_boundary) {
  const double d = static_cast<double>(config.hidden_size), v = static_cast<double>(config.vocab_size);
  double flops = layer_flops_per_token(layers, seq_len);
  // The MLM head runs on the ~15% of positions that carry a label (the training path projects only those),
  // and the span boundary head on (nearly) the same positions.
  if (mlm_head) flops += 0.15 * (2 * d * v + 2 * d * d);
  if (span_boundary) flops += 0.15 * span_boundary->flops_per_target();
  return flops;
}

bool roberta_positions(const BertConfig& c) { return c.model_type == "roberta" || c.model_type == "longformer"; }

int64_t bert_max_length(const BertConfig& c) {
  return c.max_position_embeddings - (roberta_positions(c) ? c.pad_token_id + 1 : 0);
}

int64_t longformer_window(const BertConfig& c, int64_t layer) {
  return c.attention_window.size() == 1 ? c.attention_window[0] : c.attention_window.at(static_cast<size_t>(layer));
}

namespace {

void check_longformer_windows(const BertConfig& c, const std::string& file) {
  if (c.attention != "full") throw InputError(file + ": key 'attention' = \"" + c.attention + "\": Longformer's attention is its own");
  const size_t layers = static_cast<size_t>(c.num_hidden_layers);
  if (c.attention_window.size() != 1 && c.attention_window.size() != layers) {
    throw InputError(file + ": key 'attention_window' has " + std::to_string(c.attention_window.size()) + " values for " +
                     std::to_string(layers) + " layers (one number, or one a layer)");
  }
  for (int64_t w : c.attention_window) {
    if (w < 2 || w % 2 != 0) {
      throw InputError(file + ": key 'attention_window' = " + std::to_string(w) + " is not an even number >= 2 (a query sees " +
                       "attention_window / 2 keys either side)");
    }
  }
}

}  // namespace

SpanBoundaryOptions span_boundary_options(const BertConfig& c) {
  SpanBoundaryOptions o;
  o.hidden_size = c.hidden_size;
  o.vocab_size = c.vocab_size;
  o.max_targets = c.span_boundary_max_targets;
  o.position_size = c.span_boundary_position_size;
  o.activation = nn::parse_activation(c.hidden_act);
  o.norm_eps = c.layer_norm_eps;
  return o;
}

double head_dropout(const BertConfig& c) {
  return c.classifier_dropout >= 0 ? c.classifier_dropout : c.hidden_dropout_prob;
}

void check_attention_config(const BertConfig& c, const Json& j, const std::string& file) {
  if (c.model_type == "longformer") check_longformer_windows(c, file);
  else if (c.model_type == "big_bird") {
    check_input(c.attention == "full", file + ": key 'attention' = \"" + c.attention + "\": BigBird's attention is chosen by attention_type");
  } else {
    check_family_attention(c.attention, false, file);
  }
  // "key 'linformer_k' = 256" read as the file's own value where the file never set it.
  auto value = [&](const char* key, int64_t v) {
    return "key '" + std::string(key) + "' = " + std::to_string(v) + (j.contains(key) ? "" : " (its default)");
  };
  const int64_t positions = c.max_position_embeddings, blocks = positions / std::max<int64_t>(1, c.block_size);
  // BigBird's block sizes bounded by the positions (block_size 1e18 overflowed int64 into a 4e18-byte allocation).
  check_input(c.model_type != "big_bird" || c.block_size <= positions,
              file + ": " + value("block_size", c.block_size) + " is above max_position_embeddings " +
                  std::to_string(positions) + " (a block is a run of positions)");
  check_input(c.model_type != "big_bird" || c.num_random_blocks <= blocks,
              file + ": " + value("num_random_blocks", c.num_random_blocks) + " is above the " + std::to_string(blocks) +
                  " blocks max_position_embeddings holds");
  const Json fields = complete_attention_fields(c.attention, c.attention_fields);
  const int64_t k = c.attention == "linformer" ? fields["linformer_k"].get<int64_t>() : 0;
  check_input(k <= positions,
              file + ": " + value("linformer_k", k) + " is above max_position_embeddings " +
                  std::to_string(positions) + " (Linformer projects at most that many positions to k)");
}

at::Tensor run_bert_encoder(Model& model, const BertConfig& config, at::Tensor x, const at::Tensor& attention_mask,
                            nn::Norm& embeddings_norm, torch::nn::ModuleList& layers, std::vector<at::Tensor>* hidden_states,
                            const EncoderMaskInputs& extra) {
  x = embeddings_norm(x);  // (B, T, D)
  if (model.is_training() && config.hidden_dropout_prob > 0) x = nn::dropout(x, config.hidden_dropout_prob, true);
  if (hidden_states) hidden_states->push_back(x);
  const int64_t t = x.size(1);
  nn::AttentionMask mask =
      extra.document_ids.defined()
          ? nn::document_mask(extra.document_ids, attention_mask, false, x.scalar_type(), x.device())  // (B, 1, T, T)
          : nn::AttentionMask(nn::attention_bias(attention_mask, false, t, t, x.scalar_type(), x.device()));  // (B, 1, 1, T)
  if (attention_mask.defined()) mask.key_ok = attention_mask.to(x.device()).ne(0);
  if (extra.global_attention_mask.defined()) mask.global = extra.global_attention_mask.to(x.device()).ne(0);
  // One layer's random blocks a call: the recomputed replay and the first pass see the same ones.
  std::vector<at::Tensor> blocks;
  if (extra.random_blocks.defined()) blocks = extra.random_blocks.unbind(0);
  if (blocks.empty()) return run_layers(layers, x, mask, {}, {}, nullptr, hidden_states);
  for (size_t i = 0; i < layers->size(); ++i) {
    mask.random_blocks = blocks.at(i);
    torch::nn::ModuleList one;
    one->push_back(layers[i]);
    x = run_layers(one, x, mask, {}, {}, nullptr, hidden_states);
  }
  return x;
}

void apply_masked_lm(Output& out, const at::Tensor& labels, bool full_logits,
                     const std::function<at::Tensor(const at::Tensor&)>& transform, const at::Tensor& weight,
                     const at::Tensor& bias, SpanBoundaryHead& span_boundary) {
  // Devlin et al.: the loss is on the ~15% chosen positions only; training projects just those.
  vocabulary_head(out, labels, full_logits, transform, weight, bias);
  if (!labels.defined()) return;
  out.terms.push_back({"mlm", out.loss, labels.ne(-100).sum()});
  if (span_boundary) span_boundary->add_term(out, out.last_hidden_state, labels, weight);
}

std::vector<std::pair<std::string, int64_t>> masked_lm_targets(const Batch& b, bool next_sentence, bool span,
                                                               int64_t span_max_targets) {
  std::vector<std::pair<std::string, int64_t>> t = {{"mlm", b.labels.defined() ? b.labels.ne(-100).sum().item<int64_t>() : 0}};
  if (next_sentence) {
    const at::Tensor label = b.field(kNextSentenceLabel);
    t.emplace_back("nsp", label.defined() ? label.size(0) : 0);
  }
  if (span) t.emplace_back("sbo", count_span_targets(b.labels, span_max_targets));
  return t;
}

void check_encoder_batch(const Batch& b, const std::string& architecture, const BertConfig& c,
                         const std::vector<std::string>& extras, bool per_row, bool token_tags) {
  check_unused(b.decoder_input_ids, "decoder_input_ids", architecture);
  check_unused(b.decoder_attention_mask, "decoder_attention_mask", architecture);
  check_extra_inputs(b, extras, architecture);
  check_token_matrix(b.input_ids, c.vocab_size, "input_ids");
  const int64_t t = b.input_ids.size(1);
  if (roberta_positions(c) && t > bert_max_length(c)) {
    throw InputError("input_ids has " + std::to_string(t) + " positions; " + architecture + " takes at most " +
                     std::to_string(bert_max_length(c)) + " (max_position_embeddings " +
                     std::to_string(c.max_position_embeddings) + " less padding_idx + 1)");
  }
  check_token_ids(b.token_type_ids, c.type_vocab_size, "token_type_ids");
  check_same_shape(b.attention_mask, b.input_ids, "attention_mask", "input_ids");
  check_same_shape(b.token_type_ids, b.input_ids, "token_type_ids", "input_ids");
  const at::Tensor global = b.field(kGlobalAttentionMask);
  check_same_shape(global, b.input_ids, kGlobalAttentionMask, "input_ids");
  check_token_ids(global, 2, kGlobalAttentionMask);  // 0 local, 1 global
  if (token_tags) check_token_labels(b, c.num_labels);
  else check_input_labels(b, per_row, c.num_labels, c.vocab_size);
}

}  // namespace lmkit::models
