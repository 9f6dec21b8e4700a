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
};

/// Incremental decoding state for generation: caches, encoder memory.
class DecodingSession {
 public:
  virtual ~DecodingSession() = default;
  /// Appends `tokens` (B, n) to every row; returns the next-token logits (B, V).
  virtual at::Tensor step(const at::Tensor& tokens) = 0;
  /// Keeps rows `index` (B') of the state, in that order: beam search reorders and expands.
  virtual void select(const at::Tensor& index) = 0;
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
  /// Every tensor HF writes for this model (tied duplicates excluded), in lmkit's order.
  virtual std::vector<HfTensor> hf_tensors() = 0;
  /// Names a checkpoint may hold that this model does not need (tied duplicates,
  /// old buffers); they are accepted and skipped on load.
  virtual bool hf_ignorable(const std::string& name) const { return false; }
  /// Prefix of the base model inside HF's task heads ("bert.", "transformer.");
  /// the bare base model's names omit it, and loading tries both spellings.
  virtual std::string hf_base_prefix() const { return ""; }

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

/// Throws InputError unless the tensor holds int64 or int32 ids (what an embedding
/// takes), every one in [0, limit). An undefined tensor passes.
void check_token_ids(const at::Tensor& ids, int64_t limit, const std::string& what);
/// As check_token_ids for a required (batch, length) matrix with both sizes >= 1.
void check_token_matrix(const at::Tensor& ids, int64_t limit, const std::string& what);
/// Token targets of a loss: int64 ids in [0, limit), or -100 (ignored).
void check_labels(const at::Tensor& labels, int64_t limit, const std::string& what);
/// Throws InputError unless `t` is undefined or has the shape `like` has.
void check_same_shape(const at::Tensor& t, const at::Tensor& like, const std::string& what, const std::string& like_what);
/// Labels of an encoder or decoder-only model: one class per row for a
/// classifier head, else token labels shaped like input_ids (ids or -100).
void check_input_labels(const Batch& batch, bool classifier, int64_t num_labels, int64_t vocab_size);
/// The decoder side of an encoder-decoder batch (T5, the Transformer):
/// decoder_input_ids and/or labels of shape [input_ids' batch, length >= 1], ids
/// in [0, vocab_size), labels also -100, decoder_attention_mask shaped alike.
void check_decoder_inputs(const Batch& batch, int64_t vocab_size, const std::string& model);
/// Throws InputError if `t` is defined: `model` has no use for the field `what`.
void check_unused(const at::Tensor& t, const std::string& what, const std::string& model);
/// One target per row (sequence classification, next-sentence prediction): shape
/// [batch], int64 class ids in [0, num_classes), or numbers when num_classes == 1.
void check_row_labels(const at::Tensor& labels, int64_t batch, int64_t num_classes, const std::string& what);

/// Adds an HF tensor for a plain Linear; used by every family's hf_tensors().
void add_linear(std::vector<HfTensor>& out, const std::string& hf_prefix, torch::nn::Linear& linear,
                bool transpose = false);
/// Adds HF tensors for a fused projection: `names[i]` gets rows [i·n, (i+1)·n) of the fused weight/bias.
void add_fused_linear(std::vector<HfTensor>& out, const std::vector<std::string>& hf_prefixes, torch::nn::Linear& fused);
void add_norm(std::vector<HfTensor>& out, const std::string& hf_prefix, nn::Norm& norm);

/// Runs `layers` (TransformerLayer) in order; appends each output to `hidden_states` when given.
at::Tensor run_layers(torch::nn::ModuleList& layers, at::Tensor x, const at::Tensor& self_bias,
                      const at::Tensor& memory = {}, const at::Tensor& cross_bias = {},
                      std::vector<nn::LayerCache>* caches = nullptr, std::vector<at::Tensor>* hidden_states = nullptr);

/// Mean cross-entropy over targets != -100 (HF's CrossEntropyLoss(ignore_index=-100)).
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, double label_smoothing = 0.0);

/// Sequence-classification loss: cross-entropy over class ids, or MSE against
/// float targets when the head has one output (regression, HF's convention).
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels);

/// Rows of `hidden` (B, T, D) at positions where `labels` (B, T) != -100, as (N, D),
/// and the matching labels (N): the vocabulary projection then runs only where a loss is taken.
/// N is rounded up (by at most 1/16, to a multiple of a power of two >= 8) with copies
/// of row 0 labelled -100, which cross_entropy ignores: the masked-LM count changes
/// every batch, and a few sizes per octave keep the allocator's heap from growing
/// over a long run (lmkit-bench train's heap figures).
std::pair<at::Tensor, at::Tensor> select_targets(const at::Tensor& hidden, const at::Tensor& labels);

/// HF's generic PretrainedConfig keys (generation defaults, bookkeeping): accepted and ignored.
void ignore_generic_hf_keys(ConfigReader& reader);
/// Reads num_labels from HF's id2label (or lmkit's num_labels).
int64_t read_num_labels(ConfigReader& reader, int64_t fallback);
/// Writes id2label/label2id for `num_labels` classes as HF does.
void write_num_labels(Json& j, int64_t num_labels);

/// Fills every Linear / Embedding weight from N(0, std) and zeroes biases (BERT, GPT-2 init).
void init_normal(torch::nn::Module& module, double std);

/// Number of elements over all parameters.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace lmkit::models
