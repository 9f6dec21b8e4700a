// Llama (Touvron et al. 2023) as HF's LlamaModel and its heads: a pre-norm decoder
// with RMSNorm, rotary positions (Su et al. 2021) on queries and keys, grouped-query
// attention (Ainslie et al. 2023: num_key_value_heads ≤ num_attention_heads), a SwiGLU
// feed-forward (Shazeer 2020), no biases by default, and a tied or untied LM head.
// Mistral (Jiang et al. 2023) is the same decoder with a sliding attention window: HF's
// MistralModel, built here from the same classes (LlamaConfig::sliding_window).
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/decoder_heads.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

/// HF's LlamaConfig keys (transformers 5: rope_parameters; the older top-level
/// rope_theta is read too), or MistralConfig's: Llama's less the biases, plus sliding_window.
struct LlamaConfig {
  std::string model_type = "llama";  ///< llama or mistral
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;  ///< 0: num_attention_heads (HF: null)
  int64_t head_dim = 0;             ///< 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double initializer_range = 0.02;
  double rope_theta = 10000.0;
  double attention_dropout = 0.0;
  bool attention_bias = false, mlp_bias = false;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = 1, eos_token_id = 2;
  int64_t pad_token_id = -1;  ///< -1: none (HF: null)
  int64_t sliding_window = 0;  ///< Mistral: each position sees the last sliding_window positions; 0: all (HF: null)
  double classifier_dropout = 0.1;  ///< LlamaForTokenClassification's (classifier_dropout, else 0.1)
  int64_t num_labels = 2;
  DecoderHead head = DecoderHead::kLmHead;

  int64_t kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  /// The fields of `model_type`'s config: llama, or mistral (sliding_window, no biases).
  static const ConfigTable<LlamaConfig>& table(const std::string& model_type);
  /// The defaults of `model_type`'s config (Mistral's: Mistral-7B-v0.1's sizes and window).
  static LlamaConfig defaults(const std::string& model_type);
  /// `model_type` "mistral" reads MistralConfig (its defaults, sliding_window, no biases).
  static LlamaConfig from_json(const Json& j, const std::string& file, const std::string& model_type = "llama");
  Json to_json() const;
};

/// down_proj(silu(gate_proj(x)) · up_proj(x)).
class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

/// A pre-norm layer: its self-attention is nn::MultiHeadAttention with rotary queries and keys,
/// num_key_value_heads key/value heads, each shared by num_attention_heads /
/// num_key_value_heads query heads, q_proj/k_proj/v_proj as three matrices (`q`, `k`, `v`) and,
/// with a sliding window, a cache of the last sliding_window − 1 positions (HF's).
class LlamaLayerImpl : public torch::nn::Module, public nn::GatedLayer {
 public:
  explicit LlamaLayerImpl(const LlamaConfig& c);
  /// x (B, T, D) -> (B, T, D); cache: the rotated keys and values of earlier positions.
  at::Tensor forward(const at::Tensor& x, const nn::Rotary& rotary, const nn::AttentionMask& mask, nn::KVCache* cache);
  /// forward() on a stream whose last residual sum is pending, returning its own MLP sum pending
  /// (nn::PendingSum): each sum and the RMSNorm after it are one fused step.
  nn::PendingSum forward_pending(const nn::PendingSum& x, const nn::Rotary& rotary, const nn::AttentionMask& mask,
                                 nn::KVCache* cache);
  nn::Norm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  nn::MultiHeadAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaLayer);

class LlamaImpl : public DecoderModel {
 public:
  explicit LlamaImpl(LlamaConfig config);

  std::string model_type() const override { return config.model_type; }
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override {
    return LlamaConfig::table(config.model_type).describe(config, LlamaConfig::defaults(config.model_type));
  }
  std::vector<HfTensor> hf_tensors() override;
  double flops_per_token(int64_t seq_len, int64_t) const override;
  std::string hf_base_prefix() const override { return "model."; }
  at::Tensor decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                    std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr,
                    const Packing& packing = {}) override;
  const at::Tensor& token_embedding() const override { return embed_tokens->weight; }
  void reset_parameters();

  LlamaConfig config;
  torch::nn::Embedding embed_tokens{nullptr};  ///< (V, D)
  torch::nn::ModuleList layers{nullptr};       ///< num_hidden_layers x LlamaLayer
  nn::Norm norm{nullptr};                      ///< the final RMSNorm
};
TORCH_MODULE(Llama);

struct Family;
/// The Llama family (family.h): its architectures, objectives and how to build it.
Family llama_family();
/// The Mistral family: Llama's decoder with a sliding window, as HF's Mistral* classes
/// (`model_type` "llama": the Llama family, which is built alike).
Family mistral_family(const std::string& model_type = "mistral");

}  // namespace lmkit::models
