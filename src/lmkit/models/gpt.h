// GPT-2 (Radford et al. 2019) as HF's GPT2Model and its heads: pre-norm decoder,
// learned positions, tanh GELU, final ln_f, LM head tied to the token embeddings.
#pragma once

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/model.h"
#include "lmkit/models/token_classifier.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/position.h"

namespace lmkit::models {

enum class GptHead {
  kNone,                    ///< GPT2Model: last_hidden_state
  kLmHead,                  ///< GPT2LMHeadModel: causal LM, tied head
  kSequenceClassification,  ///< GPT2ForSequenceClassification: last real token -> linear (no bias)
  kTokenClassification,     ///< GPT2ForTokenClassification: every token -> dropout -> linear, labels not shifted
};

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
  GptHead head = GptHead::kLmHead;

  int64_t inner() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  static GptConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
};

class GptImpl : public Model {
 public:
  explicit GptImpl(GptConfig config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return "gpt2"; }
  std::string architecture() const override;
  bool shifted_labels() const override { return config.head == GptHead::kLmHead; }
  Json config_json() const override { return config.to_json(); }
  std::vector<HfTensor> hf_tensors() override;
  void check_batch(const Batch& batch) const override;
  int64_t vocab_size() const override { return config.vocab_size; }
  double flops_per_token(int64_t seq_len, int64_t) const override {
    return layer_flops_per_token(layers, seq_len) + 2.0 * static_cast<double>(config.n_embd * config.vocab_size);
  }
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "transformer."; }
  GenerationSpec generation_spec() const override;
  std::unique_ptr<DecodingSession> start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                  bool use_cache) override;

  /// Final hidden states (B, T, D), ln_f applied. With `caches`, input_ids holds
  /// only new tokens; positions continue after the cached ones.
  at::Tensor decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                    std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr);
  /// Vocabulary logits for hidden rows (..., D) -> (..., V).
  at::Tensor lm_logits(const at::Tensor& hidden);
  void reset_parameters();

  GptConfig config;
  torch::nn::Embedding wte{nullptr};      ///< (V, D) token embeddings, tied to the LM head
  nn::LearnedPositions wpe{nullptr};      ///< (n_positions, D)
  torch::nn::ModuleList layers{nullptr};  ///< n_layer x TransformerLayer (pre-norm)
  nn::Norm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};     ///< (V, D), only when tie_word_embeddings is false
  torch::nn::Linear score{nullptr};       ///< (num_labels, D), no bias
  TokenClassifier token_classifier{nullptr};  ///< kTokenClassification
};
TORCH_MODULE(Gpt);

struct Family;
/// The GPT-2 family (family.h): its architectures, objectives and how to build it.
Family gpt_family();

}  // namespace lmkit::models
