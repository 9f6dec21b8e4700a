// BLOOM (BigScience 2022) as HF's BloomModel and its heads: a pre-norm decoder with
// no position embeddings but ALiBi (Press et al. 2022), a linear penalty on the distance
// to each key with a slope per head; a LayerNorm on the word embeddings; the fused
// query_key_value projection grouped by head; tanh GELU; a head tied to the embeddings.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/decoder_heads.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

/// HF's BloomConfig keys (n_embed is read as hidden_size, as HF does).
struct BloomConfig {
  int64_t vocab_size = 250880;
  int64_t hidden_size = 64;
  int64_t n_layer = 2;
  int64_t n_head = 8;
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  double hidden_dropout = 0.0, attention_dropout = 0.0;
  double classifier_dropout = -1;  ///< BloomForTokenClassification's; -1: hidden_dropout (HF's fallback)
  bool tie_word_embeddings = true;
  int64_t bos_token_id = 1, eos_token_id = 2;
  int64_t pad_token_id = -1;  ///< -1: none (HF: null)
  int64_t num_labels = 2;
  DecoderHead head = DecoderHead::kLmHead;

  static const ConfigTable<BloomConfig>& table();
  static BloomConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class BloomImpl : public DecoderModel {
 public:
  explicit BloomImpl(BloomConfig config);

  std::string model_type() const override { return "bloom"; }
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override { return BloomConfig::table().describe(config, {}); }
  std::vector<HfTensor> hf_tensors() override;
  double flops_per_token(int64_t seq_len, int64_t) const override;
  std::string hf_base_prefix() const override { return "transformer."; }
  at::Tensor decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                    std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr,
                    const Packing& packing = {}) override;
  const at::Tensor& token_embedding() const override { return word_embeddings->weight; }
  int64_t first_position() const override { return -1; }  // ALiBi: no positions to restart
  void reset_parameters();

  BloomConfig config;
  torch::nn::Embedding word_embeddings{nullptr};  ///< (V, D)
  nn::Norm word_embeddings_layernorm{nullptr};
  torch::nn::ModuleList layers{nullptr};          ///< n_layer x TransformerLayer (pre-norm, qkv grouped by head)
  nn::Norm ln_f{nullptr};
};
TORCH_MODULE(Bloom);

struct Family;
/// The BLOOM family (family.h): its architectures, objectives and how to build it.
Family bloom_family();

}  // namespace lmkit::models
