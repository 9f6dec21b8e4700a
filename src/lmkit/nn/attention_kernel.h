// Attention, the seventh open kind: how a layer's heads attend, once its queries, keys and
// values are projected. nn::MultiHeadAttention keeps the projections, the KV cache and the
// output projection and owns one AttentionKernel, made at construction by the AttentionSpec
// its options name. In-tree: full (SDPA), linformer, longformer (banded + global),
// block_sparse (BigBird) and relative (Shaw et al. 2018); others from programs and plugins
// through register_attention (docs/library.md, "Attention").
//
//   nn::AttentionSpec spec;
//   spec.name = "mine";
//   spec.create = [](torch::nn::Module& host, const nn::AttentionSettings& s) { return std::make_unique<Mine>(host, s); };
//   nn::register_attention(spec);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "lmkit/core/config.h"

namespace lmkit::nn {

/// How softmax(QKᵀ·s + bias)·V is computed. Both give the same numbers.
enum class AttentionBackend {
  kAuto,  ///< at::scaled_dot_product_attention (fused kernels where LibTorch has one for the inputs)
  kMath,  ///< explicit matmul -> softmax -> matmul
  kFused, ///< at::scaled_dot_product_attention, as kAuto
};

/// Tensors the kernels of one stack share, by name (Linformer's layerwise projection).
using SharedTensors = std::map<std::string, at::Tensor>;

/// What one call may attend to, each part named (no part means two things).
struct AttentionMask {
  AttentionMask() = default;
  /// The common case: an additive bias alone (padding, causal or position terms).
  AttentionMask(at::Tensor bias_) : bias(std::move(bias_)) {}  // NOLINT(google-explicit-constructor)
  /// Additive, broadcastable to (B, H, Tq, Tk): padding, causal, documents, T5's and ALiBi's
  /// position terms: the whole mask of the kernels that take a bias (full, relative).
  at::Tensor bias;
  /// (B, Tk) bool, true where a key is real: the mask of the kernels that take keys, not a bias
  /// (Linformer, Longformer, BigBird). Undefined: every key, or the bias's per-key values.
  at::Tensor key_ok;
  /// (B, T) bool: Longformer's global tokens, which see and are seen by every key. Undefined: none.
  at::Tensor global;
  /// BigBird's random blocks for this call, (H, nb − 2, r) int64: HF's draws (a test hook).
  /// Undefined: drawn in training, the first ones in eval (HF draws none at inference).
  at::Tensor random_blocks;
  /// Packed documents on a GPU under bf16 or fp16 (document_mask): where each segment starts
  /// over the flattened (B·T) positions, then B·T, int32 on the device (a segment is a run of
  /// one document's real tokens, or of padding), and the longest segment, an int64 scalar on
  /// the host. The varlen flash kernel's form of `bias`, which the full attention takes instead
  /// of it (varlen_attention); every other kernel reads `bias`. Undefined: none.
  at::Tensor segment_offsets, longest_segment;

  /// The parts as a list (recomputation replays a layer from tensors) and back.
  std::vector<at::Tensor> parts() const {
    return {bias, key_ok, global, random_blocks, segment_offsets, longest_segment};
  }
  static AttentionMask from_parts(const std::vector<at::Tensor>& p, size_t at);
};

/// What a kernel attends with.
struct AttentionInputs {
  /// The layer's input (B, Tq, D) (Longformer's global rows project it again); in a pre-norm
  /// layer on the fused path under bf16 autocast it is bf16, the cast the projections make.
  const at::Tensor& x;
  at::Tensor q;         ///< (B, H, Tq, hd)
  at::Tensor k, v;      ///< (B, H, Tk, hd): the cached keys first, then this call's
  const AttentionMask& mask;
};

/// What a kernel is made for: the module's geometry and the attention's own settings.
struct AttentionSettings {
  int64_t embed_dim = 0, num_heads = 0, head_dim = 0;
  bool bias = true;      ///< biases on projections a kernel adds (Longformer's global ones)
  double scale = 1.0;    ///< on the scores (1/√hd, or 1 for T5)
  double dropout = 0.0;  ///< on the probabilities, in training
  bool causal = false;   ///< a decoder's self-attention: query i sees keys up to its own position
  bool cross = false;    ///< keys and values from a memory
  /// With causal: query i sees no key `window` or more positions before it (Mistral's); 0: none.
  int64_t window = 0;
  AttentionBackend backend = AttentionBackend::kAuto;
  int64_t layer = 0;     ///< the layer's index in its stack
  int64_t max_length = 0;  ///< the longest input the model takes (its positions); 0: unbounded
  /// The attention's own settings by key (its AttentionSpec::fields, or what a family passes
  /// for the attentions it selects itself: Longformer's window, BigBird's blocks).
  Json fields = Json::object();
  /// Tensors the kernels of one stack share; never null when a kernel is made.
  std::shared_ptr<SharedTensors> shared;

  /// fields[key] as an integer / a number / a string; InputError naming the attention if absent.
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  std::string text(const std::string& key) const;
};

/// How the heads of one layer attend. Parameters a kernel adds are registered on the
/// attention module it is made with (`host`), so checkpoint names stay the module's.
class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;
  /// (B, H, Tq, hd): each query's mix of the values it may see.
  virtual at::Tensor attend(const AttentionInputs& in) = 0;
  /// Multiply-adds ×2 a query spends attending over `keys` positions, its own parameters'
  /// included (full attention: 4·keys·H·hd).
  virtual double flops_per_token(int64_t keys) const;
  /// The parameters it registered on its module (the FLOP count leaves them to flops_per_token).
  virtual std::vector<std::string> parameter_names() const { return {}; }
  /// A tensor it attends with, by name, whether its module owns it or it is shared
  /// (Linformer's "linformer_e"); undefined: none of that name.
  virtual at::Tensor tensor(const std::string& name) const { return {}; }

 protected:
  AttentionKernel(torch::nn::Module& host, AttentionSettings settings) : host_(host), settings_(std::move(settings)) {}
  bool training() const { return host_.is_training(); }
  /// The dropout on probabilities this call: settings.dropout in training, else 0.
  double dropout() const { return training() ? settings_.dropout : 0.0; }
  torch::nn::Module& host_;
  AttentionSettings settings_;
};

/// One of an attention's own config keys: read and written by every family that offers the
/// attention (`"attention": NAME` in its config), listed by `lmkit-info --fields`.
struct AttentionField {
  std::string key;
  Json fallback;                     ///< its default: an integer, a number or a string (the type it takes)
  std::string help;                  ///< one line
  double min = 0, max = 1e18;        ///< a number's range (max 1e18 or more: no upper bound)
  std::vector<std::string> choices;  ///< a string's values
};

struct AttentionSpec {
  std::string name;     ///< as a config's "attention" spells it
  std::string summary;  ///< one line for lmkit-info
  std::vector<AttentionField> fields;
  bool causal = true;     ///< serves a decoder's causal self-attention
  bool cache = true;      ///< and incremental decoding (keys and values cached)
  bool cross = false;     ///< serves cross-attention
  bool documents = true;  ///< takes a document mask (a block-diagonal bias) and restarted positions
  bool window = false;    ///< takes a causal sliding window (AttentionSettings::window)
  /// Chosen by a family from its own keys (Longformer's, BigBird's), never by "attention".
  bool family_only = false;
  /// Refuses settings it cannot run (an InputError naming the key), before anything is built.
  std::function<void(const AttentionSettings&)> check;
  std::function<std::unique_ptr<AttentionKernel>(torch::nn::Module& host, const AttentionSettings&)> create;
  std::string source;  ///< who registered it: "lmkit", or a plugin's path (register_attention sets it)
};

/// Every attention: lmkit's own, then those registered.
const std::vector<AttentionSpec>& attentions();
/// Adds an attention (from a program or a plugin); its name must be new.
void register_attention(AttentionSpec spec);
/// The attention `name`; InputError listing those a config may name otherwise.
const AttentionSpec& attention(const std::string& name);
/// "full, linformer or relative": the attentions a config's "attention" may name.
std::string attention_names();
/// The kernel of `name` for `settings`, on `host`; its check run first.
std::unique_ptr<AttentionKernel> make_attention_kernel(const std::string& name, torch::nn::Module& host,
                                                       const AttentionSettings& settings);

// ---- The attention functions the kernels are made of.

/// softmax(q·kᵀ·scale + bias)·v with dropout on the probabilities.
///   q (B, H, Tq, hd), k and v (B, H, Tk, hd), bias broadcastable to (B, H, Tq, Tk) or undefined.
/// When `weights` is given, the probabilities (B, H, Tq, Tk) are stored there
/// (this forces the explicit path). `causal` (Tq == Tk, no bias): query i sees keys
/// 0..i, applied inside the kernel (`is_causal`: the flash kernel on a GPU) instead of
/// through a bias tensor, which would rule the flash kernel out.
at::Tensor scaled_dot_product(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                              double scale, double dropout, bool training,
                              AttentionBackend backend = AttentionBackend::kAuto, at::Tensor* weights = nullptr,
                              bool causal = false);

/// The additive mask value HF uses: the dtype's lowest finite number, so masked
/// keys get exactly zero weight and no row ever becomes NaN.
double mask_value(at::ScalarType dtype);

/// The additive bias of a boolean "may attend" mask: 0 where allowed, mask_value elsewhere.
at::Tensor bias_of(const at::Tensor& allowed, at::ScalarType dtype);

/// The additive bias of a mask for the kernels that take one: its bias, else one made from its
/// key_ok (B, 1, 1, Tk), else undefined (every key).
at::Tensor additive_bias(const AttentionMask& mask, int64_t batch, int64_t keys, at::ScalarType dtype);

/// The keys a mask lets through, (B, Tk) bool: its key_ok, else its bias's per-key values
/// (a (B|1, 1, 1, Tk) bias: 0 where real), else undefined (every key). `what` names the
/// attention in the error a bias with a query dimension gets (a document or causal mask).
at::Tensor real_keys(const AttentionMask& mask, int64_t batch, int64_t keys, const char* what);

}  // namespace lmkit::nn
