// GPT-2 (Radford et al. 2019) as HF's GPT2Model and its heads: pre-norm decoder,
// learned positions, tanh GELU, final ln_f, LM head tied to the token embeddings.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/decoder_heads.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"

namespace lmkit::models {

/// HF's GPT2Config keys.
struct GptConfig {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_inner = 0;  ///< 0: 4 · n_embd (HF: null)
  std::string activation_function = "gelu_new";
  double resid_pdrop = 0.1, embd_pdrop = 0.1, attn_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  double classifier_dropout = 0.1;  ///< GPT2ForTokenClassification's (HF: classifier_dropout, else 0.1)
  int64_t bos_token_id = 50256, eos_token_id = 50256;
  int64_t pad_token_id = -1;  ///< -1: none (HF: null)
  bool tie_word_embeddings = true;
  int64_t num_labels = 2;
  /// Self-attention: a registered attention that serves a causal decoder (nn/attention_kernel.h):
  /// "full" (GPT-2's), "relative" (Shaw et al. 2018), a plugin's; its own keys in attention_fields.
  std::string attention = "full";
  Json attention_fields = Json::object();
  /// "absolute": GPT-2's learned positions (wpe); "none": no position table, the attention's
  /// own terms carry order (Shaw et al.'s relative attention alone, as in their paper). lmkit's key
  /// (HF's BERT spells it so), written only when "none".
  std::string position_embedding_type = "absolute";
  DecoderHead head = DecoderHead::kLmHead;

  int64_t inner() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  static const ConfigTable<GptConfig>& table();
  static GptConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class GptImpl : public DecoderModel {
 public:
  explicit GptImpl(GptConfig config);

  std::string model_type() const override { return "gpt2"; }
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override { return GptConfig::table().describe(config, {}); }
  std::vector<HfTensor> hf_tensors() override;
  double flops_per_token(int64_t seq_len, int64_t) const override {
    return layer_flops_per_token(layers, seq_len) + 2.0 * static_cast<double>(config.n_embd * config.vocab_size);
  }
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "transformer."; }
  at::Tensor decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                    std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr,
                    const Packing& packing = {}) override;
  const at::Tensor& token_embedding() const override { return wte->weight; }
  void reset_parameters();

  GptConfig config;
  torch::nn::Embedding wte{nullptr};      ///< (V, D) token embeddings, tied to the LM head
  nn::LearnedPositions wpe{nullptr};      ///< (n_positions, D); null with position_embedding_type "none"
  torch::nn::ModuleList layers{nullptr};  ///< n_layer x TransformerLayer (pre-norm)
  nn::Norm ln_f{nullptr};
};
TORCH_MODULE(Gpt);

struct Family;
/// The GPT-2 family (family.h): its architectures, objectives and how to build it.
Family gpt_family();

}  // namespace lmkit::models
