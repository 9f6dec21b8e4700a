#include "lmkit/models/hf_names.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"

namespace lmkit::models {

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

void add_kernel_tensors(std::vector<HfTensor>& out, const std::string& hf_prefix, const nn::MultiHeadAttentionImpl& attention) {
  for (const std::string& name : attention.kernel().parameter_names()) {
    if (name.find('.') != std::string::npos) continue;
    const at::Tensor own = attention.kernel_parameter(name);
    if (own.defined()) out.push_back({hf_prefix + name, own});
  }
}

}  // namespace lmkit::models
