// T5 (Raffel et al. 2020) as HF's T5ForConditionalGeneration: pre-norm RMSNorm
// stacks without biases, no 1/sqrt(d) score scaling, a bucketed relative
// position bias owned by each stack's first block and shared by all its blocks,
// ReLU (v1.0) or gated-GELU (v1.1) feed-forward, and a tied head rescaled by
// d_model^-0.5 (v1.0) or an untied one (v1.1).
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/config_table.h"
#include "lmkit/models/model.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"

namespace lmkit::models {

enum class T5Head {
  kNone,                  ///< T5Model: decoder last_hidden_state and encoder_last_hidden_state
  kConditionalGeneration, ///< T5ForConditionalGeneration
  kEncoderClassification, ///< encoder only: masked mean pool -> dense -> tanh -> linear
  kTokenClassification,   ///< T5ForTokenClassification: encoder only, every token -> dropout -> linear
};

/// HF's T5Config keys.
struct T5Config {
  int64_t vocab_size = 32128;
  int64_t d_model = 512;
  int64_t d_kv = 64;
  int64_t d_ff = 2048;
  int64_t num_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t num_heads = 8;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  double dropout_rate = 0.1;
  double classifier_dropout = 0.0;
  double layer_norm_epsilon = 1e-6;
  double initializer_factor = 1.0;
  std::string feed_forward_proj = "relu";  ///< relu (v1.0) or gated-gelu (v1.1)
  bool tie_word_embeddings = true;
  /// Multiply the decoder output by d_model^-0.5 before the LM head (Mesh TF's T5 v1.0).
  /// transformers < 5 derived it from tie_word_embeddings; transformers 5 writes it
  /// beside a tie_word_embeddings it always sets true (its T5 v1.1: tied, unscaled).
  bool scale_decoder_outputs = true;
  int64_t pad_token_id = 0, eos_token_id = 1, decoder_start_token_id = 0;
  int64_t num_labels = 2;
  T5Head head = T5Head::kConditionalGeneration;

  static const ConfigTable<T5Config>& table();
  static T5Config from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

/// One stack (encoder or decoder): blocks, the shared relative bias, final norm.
class T5StackImpl : public torch::nn::Module {
 public:
  T5StackImpl(const T5Config& config, bool decoder);
  /// embedded (B, T, D) -> (B, T, D), final norm applied.
  ///   mask: (B, T_total) padding mask of this stack's input (may be undefined).
  ///   memory, memory_mask: the encoder output and its padding mask (decoder only).
  at::Tensor forward(at::Tensor x, const at::Tensor& mask, const at::Tensor& memory = {},
                     const at::Tensor& memory_mask = {}, std::vector<nn::LayerCache>* caches = nullptr,
                     std::vector<at::Tensor>* hidden_states = nullptr);

  bool decoder;
  double dropout_rate;
  torch::nn::ModuleList layers{nullptr};
  nn::RelativePositionBias relative_bias{nullptr};  ///< HF: block.0.layer.0.SelfAttention.relative_attention_bias
  nn::Norm final_norm{nullptr};
};
TORCH_MODULE(T5Stack);

class T5Impl : public Model {
 public:
  explicit T5Impl(T5Config config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return "t5"; }
  std::string architecture() const override;
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override { return T5Config::table().describe(config, {}); }
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  int64_t vocab_size() const override { return config.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override {
    return encoder_decoder_flops_per_token(*this, config.d_model, config.num_heads * config.d_kv, config.num_layers,
                                           config.num_decoder_layers, config.vocab_size, seq_len, target_len);
  }
  GenerationSpec generation_spec() const override;
  std::unique_ptr<DecodingSession> start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                  bool use_cache) override;
  bool hf_ignorable(const std::string& name) const override;
  /// T5ForTokenClassification keeps its T5EncoderModel under "transformer.".
  std::string hf_base_prefix() const override { return config.head == T5Head::kTokenClassification ? "transformer." : ""; }

  /// Encoder output (B, S, D).
  at::Tensor encode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                    std::vector<at::Tensor>* hidden_states = nullptr);
  /// Decoder output (B, T, D); with caches, decoder_input_ids holds only new tokens.
  at::Tensor decode(const at::Tensor& decoder_input_ids, const at::Tensor& decoder_attention_mask,
                    const at::Tensor& memory, const at::Tensor& memory_mask,
                    std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr);
  /// Vocabulary logits for decoder rows (..., D) -> (..., V).
  at::Tensor lm_logits(const at::Tensor& hidden);
  /// What the LM head projects: the decoder output, rescaled for v1.0's tied head.
  at::Tensor lm_input(const at::Tensor& hidden) const;
  void reset_parameters();

  T5Config config;
  torch::nn::Embedding shared{nullptr};  ///< (V, D) input embeddings of both stacks
  T5Stack encoder{nullptr};
  T5Stack decoder{nullptr};
  torch::nn::Linear lm_head{nullptr};           ///< (V, D), only when untied
  torch::nn::Linear classifier_dense{nullptr};  ///< (D, D)
  torch::nn::Linear classifier_out{nullptr};    ///< (num_labels, D)
  TokenClassifier token_classifier{nullptr};    ///< kTokenClassification
};
TORCH_MODULE(T5);

struct Family;
/// The t5 family (family.h): its architectures, objectives and how to build it.
Family t5_family();

}  // namespace lmkit::models
