#include "lmkit/models/model.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

namespace lmkit::models {

namespace {

class StandardSession : public DecodingSession {
 public:
  StandardSession(DecodeFn decode, std::function<at::Tensor(const at::Tensor&)> head, at::Tensor memory,
                  at::Tensor memory_mask, bool use_cache)
      : decode_(std::move(decode)), head_(std::move(head)), memory_(std::move(memory)),
        memory_mask_(std::move(memory_mask)), use_cache_(use_cache) {}

  at::Tensor step(const at::Tensor& tokens) override {
    at::Tensor hidden;
    if (use_cache_) {
      hidden = decode_(tokens, &caches_, memory_, memory_mask_);  // (B, n, D)
    } else {
      history_ = history_.defined() ? at::cat({history_, tokens}, 1) : tokens;
      hidden = decode_(history_, nullptr, memory_, memory_mask_);  // (B, T, D)
    }
    return head_(hidden.select(1, -1));  // (B, V)
  }

  void select(const at::Tensor& index) override {
    auto pick = [&](at::Tensor& t) {
      if (t.defined()) t = t.index_select(0, index);
    };
    pick(memory_), pick(memory_mask_), pick(history_);
    for (auto& c : caches_) {
      pick(c.self_attn.key), pick(c.self_attn.value), pick(c.cross_attn.key), pick(c.cross_attn.value);
    }
  }

 private:
  DecodeFn decode_;
  std::function<at::Tensor(const at::Tensor&)> head_;
  at::Tensor memory_, memory_mask_, history_;
  std::vector<nn::LayerCache> caches_;
  bool use_cache_;
};

}  // namespace

std::unique_ptr<DecodingSession> make_decoding_session(DecodeFn decode, std::function<at::Tensor(const at::Tensor&)> head,
                                                       at::Tensor memory, at::Tensor memory_mask, bool use_cache) {
  return std::make_unique<StandardSession>(std::move(decode), std::move(head), std::move(memory), std::move(memory_mask),
                                           use_cache);
}

std::unique_ptr<DecodingSession> Model::start_decoding(const at::Tensor&, const at::Tensor&, bool) {
  throw InputError(architecture() + " cannot generate text (it has no language-model head)");
}

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
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
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

void check_unused(const at::Tensor& t, const std::string& what, const std::string& model) {
  if (t.defined()) throw InputError(model + " does not take " + what);
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

void add_linear(std::vector<HfTensor>& out, const std::string& hf_prefix, torch::nn::Linear& linear, bool transpose) {
  out.push_back({hf_prefix + ".weight", linear->weight, transpose});
  if (linear->bias.defined()) out.push_back({hf_prefix + ".bias", linear->bias, false});
}

void add_fused_linear(std::vector<HfTensor>& out, const std::vector<std::string>& hf_prefixes, torch::nn::Linear& fused) {
  const int64_t n = fused->weight.size(0) / static_cast<int64_t>(hf_prefixes.size());
  for (size_t i = 0; i < hf_prefixes.size(); ++i) {
    const int64_t a = static_cast<int64_t>(i) * n;
    out.push_back({hf_prefixes[i] + ".weight", fused->weight.slice(0, a, a + n), false});
    if (fused->bias.defined()) out.push_back({hf_prefixes[i] + ".bias", fused->bias.slice(0, a, a + n), false});
  }
}

void add_norm(std::vector<HfTensor>& out, const std::string& hf_prefix, nn::Norm& norm) {
  out.push_back({hf_prefix + ".weight", norm->weight, false});
  if (norm->bias.defined()) out.push_back({hf_prefix + ".bias", norm->bias, false});
}

at::Tensor run_layers(torch::nn::ModuleList& layers, at::Tensor x, const at::Tensor& self_bias, const at::Tensor& memory,
                      const at::Tensor& cross_bias, std::vector<nn::LayerCache>* caches,
                      std::vector<at::Tensor>* hidden_states) {
  if (caches && caches->size() < layers->size()) caches->resize(layers->size());
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    x = layer->forward(x, self_bias, memory, cross_bias, caches ? &(*caches)[i] : nullptr);
    if (hidden_states) hidden_states->push_back(x);
  }
  return x;
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, double label_smoothing) {
  at::Tensor flat = logits.reshape({-1, logits.size(-1)});
  at::Tensor t = targets.reshape({-1});
  if (flat.scalar_type() != at::kFloat) flat = flat.to(at::kFloat);  // bf16 logits: loss in fp32
  if (t.ne(-100).sum().item<int64_t>() == 0) return flat.sum() * 0.0;  // nothing to predict: 0, not NaN
  return at::cross_entropy_loss(flat, t, {}, at::Reduction::Mean, -100, label_smoothing);
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels) {
  if (logits.size(-1) == 1) return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
  return cross_entropy(logits, labels);
}

std::pair<at::Tensor, at::Tensor> select_targets(const at::Tensor& hidden, const at::Tensor& labels) {
  at::Tensor flat_labels = labels.reshape({-1});
  at::Tensor index = flat_labels.ne(-100).nonzero().squeeze(1);  // (n)
  at::Tensor targets = flat_labels.index_select(0, index);
  const int64_t n = index.size(0);
  int64_t granule = 8;
  while (granule * 2 * 16 <= n) granule *= 2;
  const int64_t padded = (n + granule - 1) / granule * granule;
  if (padded > n) {
    index = at::cat({index, at::zeros({padded - n}, index.options())});
    targets = at::cat({targets, at::full({padded - n}, -100, targets.options())});
  }
  at::Tensor rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, index);  // (N, D)
  return {rows, targets};
}

void ignore_generic_hf_keys(ConfigReader& r) {
  r.ignore({"_name_or_path", "add_cross_attention", "architectures", "bad_words_ids", "begin_suppress_tokens",
            "chunk_size_feed_forward", "cross_attention_hidden_size", "diversity_penalty", "do_sample",
            "early_stopping", "encoder_no_repeat_ngram_size", "exponential_decay_length_penalty", "finetuning_task",
            "forced_bos_token_id", "forced_eos_token_id", "is_decoder", "is_encoder_decoder", "length_penalty",
            "max_length", "min_length", "no_repeat_ngram_size", "num_beam_groups", "num_beams",
            "num_return_sequences", "output_attentions", "output_hidden_states", "output_scores", "prefix",
            "problem_type", "pruned_heads", "remove_invalid_values", "repetition_penalty", "return_dict",
            "return_dict_in_generate", "sep_token_id", "suppress_tokens", "task_specific_params", "temperature",
            "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class", "top_k", "top_p", "torch_dtype", "dtype",
            "torchscript", "transformers_version", "typical_p", "use_bfloat16", "use_cache", "model_type",
            "label2id", "gradient_checkpointing"});
}

int64_t read_num_labels(ConfigReader& r, int64_t fallback) {
  int64_t n = fallback;
  r.get("num_labels", n, int64_t{1});
  Json id2label;
  if (r.get("id2label", id2label)) {
    if (!id2label.is_object() || id2label.empty()) throw InputError(r.file() + ": key 'id2label' must be a non-empty object");
    n = static_cast<int64_t>(id2label.size());
  }
  return n;
}

void write_num_labels(Json& j, int64_t num_labels) {
  Json id2label = Json::object(), label2id = Json::object();
  for (int64_t i = 0; i < num_labels; ++i) {
    id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    label2id["LABEL_" + std::to_string(i)] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
}

void init_normal(torch::nn::Module& module, double std) {
  at::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {  // callable from constructors
    if (auto* linear = child->as<torch::nn::LinearImpl>()) {
      linear->weight.normal_(0, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = child->as<torch::nn::EmbeddingImpl>()) {
      embedding->weight.normal_(0, std);
    }
  }
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace lmkit::models
