// The original encoder–decoder Transformer (Vaswani et al. 2017): post-norm
// layers, sinusoidal positions, embeddings scaled by sqrt(d_model), ReLU FFN,
// optionally shared source/target/output embeddings, label-smoothed loss.
// There is no HF class for it: its checkpoint uses lmkit's parameter names
// with model_type "transformer".
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/config_table.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/position.h"

namespace lmkit::models {

struct TransformerConfig {
  int64_t src_vocab_size = 32000;
  int64_t tgt_vocab_size = 32000;
  int64_t d_model = 512;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  int64_t num_heads = 8;
  int64_t d_ff = 2048;
  double dropout = 0.1;            ///< residual, embedding (§5.4)
  double attention_dropout = 0.0;
  std::string activation = "relu";
  int64_t max_position_embeddings = 1024;
  double layer_norm_eps = 1e-5;
  /// One embedding matrix for source and target (needs a joint vocabulary).
  bool share_embeddings = true;
  /// The output projection reuses the target embedding (§3.4).
  bool tie_word_embeddings = true;
  double label_smoothing = 0.1;    ///< §5.4
  /// Both stacks' self-attention: a registered attention that serves a causal decoder ("full",
  /// "relative": Shaw et al. 2018 on this model); cross-attention stays full.
  std::string attention = "full";
  Json attention_fields = Json::object();
  int64_t pad_token_id = 0, bos_token_id = 2, eos_token_id = 1, decoder_start_token_id = 2;

  static const ConfigTable<TransformerConfig>& table();
  static TransformerConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class TransformerImpl : public Model {
 public:
  explicit TransformerImpl(TransformerConfig config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return "transformer"; }
  /// Its one architecture: no head to choose.
  static constexpr const char* kArchitecture = "TransformerForSeq2Seq";
  std::string architecture() const override { return kArchitecture; }
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override { return TransformerConfig::table().describe(config, {}); }
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  int64_t vocab_size() const override { return config.tgt_vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override {
    return encoder_decoder_flops_per_token(*this, config.d_model, config.d_model, config.encoder_layers,
                                           config.decoder_layers, config.tgt_vocab_size, seq_len, target_len);
  }
  GenerationSpec generation_spec() const override;
  std::unique_ptr<DecodingSession> start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                  bool use_cache) override;

  /// Encoder output (B, S, D).
  at::Tensor encode(const at::Tensor& input_ids, const at::Tensor& attention_mask);
  /// Decoder output (B, T, D); with caches, decoder_input_ids holds only new tokens.
  at::Tensor decode(const at::Tensor& decoder_input_ids, const at::Tensor& decoder_attention_mask,
                    const at::Tensor& memory, const at::Tensor& memory_mask,
                    std::vector<nn::LayerCache>* caches = nullptr);
  at::Tensor lm_logits(const at::Tensor& hidden);
  void reset_parameters();

  TransformerConfig config;
  torch::nn::Embedding src_embed{nullptr};  ///< (V_src, D)
  torch::nn::Embedding tgt_embed{nullptr};  ///< (V_tgt, D); the same module as src_embed when shared
  nn::SinusoidalPositions positions{nullptr};
  torch::nn::ModuleList encoder_layers{nullptr};
  torch::nn::ModuleList decoder_layers{nullptr};
  torch::nn::Linear out_proj{nullptr};      ///< (V_tgt, D), only when untied

 private:
  at::Tensor embed(torch::nn::Embedding& table, const at::Tensor& ids, int64_t offset);
};
TORCH_MODULE(Transformer);

struct Family;
/// The transformer family (family.h): its architectures, objectives and how to build it.
Family transformer_family();

}  // namespace lmkit::models
