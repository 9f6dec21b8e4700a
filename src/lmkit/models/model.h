// What every lmkit model shares: forward(Batch) -> Output, its HuggingFace
// config, and the one table that maps its parameters to HF tensor names.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include "lmkit/core/batch.h"
#include "lmkit/core/config.h"
#include "lmkit/nn/transformer_layer.h"

namespace lmkit::models {

/// One tensor of an HF checkpoint and where it lives in an lmkit model.
struct HfTensor {
  std::string name;        ///< HF parameter name, e.g. "bert.encoder.layer.0.attention.self.query.weight"
  at::Tensor param;        ///< the lmkit parameter, or a row-slice view of a fused one (Q of qkv)
  bool transpose = false;  ///< GPT-2's Conv1D stores (in, out); lmkit's Linear (out, in)
  /// Other names a checkpoint may hold it under, read but never written (Transformers 5's
  /// spelling of ViT-MAE's decoder layers).
  std::vector<std::string> aliases = {};
};

/// Incremental decoding state for generation: caches, encoder memory.
class DecodingSession {
 public:
  virtual ~DecodingSession() = default;
  /// Appends `tokens` (B, n) to every row; returns the next-token logits (B, V).
  virtual at::Tensor step(const at::Tensor& tokens) = 0;
  /// As step(), but the logits of every new position (B, n, V): scoring continuations of a cached context.
  virtual at::Tensor step_all(const at::Tensor& tokens) = 0;
  /// Keeps rows `index` (B') of the state, in that order: beam search reorders and expands.
  virtual void select(const at::Tensor& index) = 0;
};

/// Documents packed into a batch's rows (document masking): Batch::extra's kDocumentIds
/// and kPositionIds; an undefined field means one document a row, positions 0, 1, 2, ...
struct Packing {
  at::Tensor document_ids;  ///< (B, T) int64
  at::Tensor position_ids;  ///< (B, T) int64
  static Packing of(const Batch& batch);
};

/// What generation needs to know of a model.
struct GenerationSpec {
  bool encoder_decoder = false;   ///< decoding starts from decoder_start_token_id, not the prompt
  int64_t decoder_start_token_id = 0;
  int64_t eos_token_id = -1;      ///< -1: none
  int64_t vocab_size = 0;
  int64_t max_positions = 0;      ///< decoder positions the model has (0: no limit, T5's relative positions)
};

/// Base of every task model. Models take a Batch and return an Output whose
/// `loss` is set when labels are present; the trainer never knows which model it trains.
class Model : public torch::nn::Module {
 public:
  virtual Output forward(const Batch& batch) = 0;
  /// HF `model_type`: bert, gpt2, t5, transformer.
  virtual std::string model_type() const = 0;
  /// HF class name of this model and head, e.g. "BertForPreTraining".
  virtual std::string architecture() const = 0;
  /// config.json with HF key names; round-trips through the registry.
  virtual Json config_json() const = 0;
  /// The config's fields, one row each: {key, value, default, check} (lmkit-info --fields);
  /// empty where a family declares none.
  virtual Json config_fields() const { return Json::array(); }
  /// Every tensor HF writes for this model (tied duplicates excluded), in lmkit's order.
  virtual std::vector<HfTensor> hf_tensors() = 0;
  /// Names a checkpoint may hold that this model does not need (tied duplicates,
  /// old buffers); they are accepted and skipped on load.
  virtual bool hf_ignorable(const std::string& name) const { return false; }
  /// Prefix of the base model inside HF's task heads ("bert.", "transformer.");
  /// the bare base model's names omit it, and loading tries both spellings.
  virtual std::string hf_base_prefix() const { return ""; }
  /// Models trained with this one and saved beside it, each a checkpoint of its own in a
  /// sub-folder of this one's (a generator in generator/ beside its discriminator): (folder, model). They
  /// are submodules, so the optimizer and a resume cover them; save_pretrained writes
  /// them and load_pretrained reads those present back (load_companions).
  virtual std::vector<std::pair<std::string, Model*>> companions() { return {}; }

  /// The loss terms forward() reports for `batch` and each one's number of targets,
  /// counted from the batch alone (the trainer weights the terms before it runs the
  /// model); an empty batch (no input_ids) gives the same names with 0 targets.
  /// Default: one term, "loss", over models::count_targets().
  virtual std::vector<std::pair<std::string, int64_t>> loss_targets(const Batch& batch) const;
  /// Names of the metrics forward() reports in eval mode (Output::metrics), for reducing across ranks.
  virtual std::vector<std::string> metric_names() const { return {}; }
  /// Whether labels are the inputs predicted one position on (a causal LM head): the
  /// first position of each row then carries no loss.
  virtual bool shifted_labels() const { return false; }
  /// Whether the model takes packed documents (kDocumentIds: attention stays within each).
  virtual bool takes_documents() const { return false; }
  /// The value kPositionIds gives a sequence's first token (0; RoBERTa's padding_idx + 1),
  /// or -1 when the model takes no position_ids (ALiBi, relative positions, none at all).
  virtual int64_t first_position() const { return -1; }
  /// Rows of the output vocabulary (the LM head's; the target vocabulary of an encoder–decoder).
  virtual int64_t vocab_size() const = 0;
  /// Matrix-multiply FLOPs of one forward pass per input token, for sequences of
  /// `seq_len` inputs (and `target_len` decoder positions): 2 per weight a token meets,
  /// 4·keys·inner per attention layer, the output head where the training path runs it.
  /// A training step costs three times this (docs/benchmarks.md, the FLOP count).
  virtual double flops_per_token(int64_t seq_len, int64_t target_len) const = 0;

  /// Throws InputError when the batch cannot be fed to this model: ids outside
  /// the vocabulary, labels outside their range, mismatched shapes.
  virtual void check_batch(const Batch& batch) const = 0;

  /// Generation support; the default says the model cannot generate.
  virtual GenerationSpec generation_spec() const { return {}; }
  /// Starts decoding for prompts (B, T) (encoder inputs for encoder–decoder models).
  /// Without `use_cache`, every step re-runs the whole sequence (for checking the cache).
  virtual std::unique_ptr<DecodingSession> start_decoding(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                                          bool use_cache);

  /// Compute vocabulary logits at every position, not only at the positions
  /// that carry a loss (the training path projects only those).
  bool full_logits = false;
  /// Collect every layer's output in Output::hidden_states (HF's output_hidden_states).
  bool output_hidden_states = false;
};

/// The decoding session every family uses: `decode(ids, caches, memory, memory_mask)`
/// gives hidden states (B, T, D) for new ids; `head` maps the last row to logits.
using DecodeFn = std::function<at::Tensor(const at::Tensor& ids, std::vector<nn::LayerCache>* caches,
                                          const at::Tensor& memory, const at::Tensor& memory_mask)>;
std::unique_ptr<DecodingSession> make_decoding_session(DecodeFn decode, std::function<at::Tensor(const at::Tensor&)> head,
                                                       at::Tensor memory, at::Tensor memory_mask, bool use_cache);

/// The decoding session of an encoder-decoder model M (T5, the Transformer), which
/// has encode(ids, mask), decode(ids, mask, memory, memory_mask, caches) and
/// lm_logits(hidden): the encoder runs once on the prompts, each step decodes against it.
template <typename M>
std::unique_ptr<DecodingSession> encoder_decoder_session(M& model, const at::Tensor& input_ids,
                                                         const at::Tensor& attention_mask, bool use_cache) {
  at::Tensor memory = model.encode(input_ids, attention_mask);  // (B, S, D), computed once
  return make_decoding_session(
      [&model](const at::Tensor& ids, std::vector<nn::LayerCache>* caches, const at::Tensor& mem, const at::Tensor& mask) {
        return model.decode(ids, at::Tensor(), mem, mask, caches);
      },
      [&model](const at::Tensor& h) { return model.lm_logits(h); }, std::move(memory), attention_mask, use_cache);
}

/// The decoder's inputs for labels (B, T) of an encoder-decoder (HF's _shift_right):
/// [decoder_start, labels[:, :-1]] with -100 (ignored) replaced by pad.
at::Tensor shift_right(const at::Tensor& labels, int64_t decoder_start_token_id, int64_t pad_token_id);

/// Runs `layers` (TransformerLayer) in order; appends each output to `hidden_states` when given;
/// returns the last output, through `final_norm` when given (a pre-norm stack's final norm,
/// which then makes the last layer's residual sum in the same fused step).
at::Tensor run_layers(torch::nn::ModuleList& layers, at::Tensor x, const nn::AttentionMask& self_mask,
                      const at::Tensor& memory = {}, const at::Tensor& cross_bias = {},
                      std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr,
                      nn::Norm* final_norm = nullptr);

/// Forward FLOPs per token of a TransformerLayer stack attending over `keys` positions:
/// 2 per matrix weight, and each self-attention kernel's own count (AttentionKernel::flops_per_token,
/// its parameters included); 4·keys·inner per cross-attention.
double layer_flops_per_token(const torch::nn::ModuleList& layers, int64_t keys);

/// Forward FLOPs per encoder token of an encoder–decoder model (T5, the Transformer): the
/// encoder's matrices at `seq_len` tokens, the decoder's, its attention and the LM head
/// at `target_len` tokens, weights told apart by the names "decoder", "embed", "lm_head".
double encoder_decoder_flops_per_token(const torch::nn::Module& model, int64_t d_model, int64_t inner,
                                       int64_t encoder_layers, int64_t decoder_layers, int64_t vocab,
                                       int64_t seq_len, int64_t target_len);

/// Whether a family's constructor draws its random initialisation (reset_parameters): yes,
/// unless a SkipWeightInit lives on this thread. A plugin's family asks it too (docs/library.md).
bool initialise_weights();

/// While one lives (on this thread), the models built leave their weights as LibTorch's modules
/// made them instead of drawing HF's initialisation: every weight is about to be read from a
/// checkpoint (load_pretrained without a new head), or only the shapes matter (lmkit-info).
/// HF's from_pretrained skips the draw too; here it was most of the time a checkpoint took to
/// load (docs/benchmarks.md, "Loading a checkpoint").
class SkipWeightInit {
 public:
  explicit SkipWeightInit(bool on = true);
  ~SkipWeightInit();
  SkipWeightInit(const SkipWeightInit&) = delete;
  SkipWeightInit& operator=(const SkipWeightInit&) = delete;

 private:
  bool previous_;
};

/// Fills every Linear / Embedding weight from N(0, std) and zeroes biases (BERT, GPT-2 init).
void init_normal(torch::nn::Module& module, double std);
/// HF's initialisation of the norms: every nn::Norm below `module` gets weights one and biases zero.
void reset_norms(torch::nn::Module& module);

/// Number of elements over all parameters.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace lmkit::models
