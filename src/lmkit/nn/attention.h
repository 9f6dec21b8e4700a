// Multi-head attention shared by every model: self- and cross-attention, fused
// projections, a KV cache for incremental decoding, and one attention kernel
// (attention_kernel.h: full, Linformer, Longformer, BigBird, relative, a plugin's)
// chosen by name at construction; rotary positions, grouped-query attention and a
// sliding window (Llama's, Mistral's) are options of the same module. The functions the
// kernels are made of are here too.
#pragma once

#include <cstdint>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "lmkit/core/config.h"
#include "lmkit/nn/attention_kernel.h"

namespace lmkit::nn {

/// Additive attention bias (B|1, 1, Tq, Tk), or an undefined tensor when nothing is masked.
///   key_padding_mask: (B, Tk) with 1 for real keys, 0 for padding; may be undefined.
///   causal: query i (at absolute position offset + i) sees keys 0..offset+i,
///           where offset = Tk - Tq (the cached prefix during incremental decoding).
///   causal_in_kernel: when the causal mask is all there is (no padding mask, Tq == Tk),
///           return an undefined tensor: a `causal` MultiHeadAttention applies it in the kernel.
///   window: with `causal`, query i also sees no key `window` or more positions before it
///           (a sliding window, Mistral's: HF's kv_idx > q_idx - sliding_window); 0: no window.
at::Tensor attention_bias(const at::Tensor& key_padding_mask, bool causal, int64_t q_len, int64_t k_len,
                          at::ScalarType dtype, at::Device device, bool causal_in_kernel = false, int64_t window = 0);

/// attention_bias(key_padding_mask, causal, T, T, ..., window) for documents packed into each
/// row: query i also sees key j only where document_ids[b, i] == document_ids[b, j] (Megatron-LM's
/// reset_attention_mask; a block-diagonal mask, causal inside with `causal`): (B, 1, T, T).
///   document_ids (B, T) int64; key_padding_mask (B, T) or undefined.
at::Tensor document_attention_bias(const at::Tensor& document_ids, const at::Tensor& key_padding_mask, bool causal,
                                   at::ScalarType dtype, at::Device device, int64_t window = 0);

/// document_attention_bias as a mask; where the attention computes in bf16 or fp16 on a GPU
/// (autocast's dtype there, else `dtype`), also the documents' segments
/// (AttentionMask::segment_offsets), which the full attention takes through the varlen flash
/// kernel instead of the T × T bias, unless LMKIT_DISABLE names "varlen".
AttentionMask document_mask(const at::Tensor& document_ids, const at::Tensor& key_padding_mask, bool causal,
                            at::ScalarType dtype, at::Device device, int64_t window = 0);

/// The segments of packed rows: a new one where a row starts, its document changes, or its
/// real tokens turn to padding (key_padding_mask 0). Returns {starts then B·T (int32, on
/// `device`), the longest (an int64 scalar on the host)}; reads the ids on the host, so one
/// device read a forward pass.
std::pair<at::Tensor, at::Tensor> document_segments(const at::Tensor& document_ids, const at::Tensor& key_padding_mask,
                                                    at::Device device);

/// Whether varlen_attention takes these: the mask holds segments, q and k are CUDA tensors in
/// bf16 or fp16 of the same shape (as many keys as queries, heads as key heads), with a head
/// size the flash kernel takes (a multiple of 8, at most 256).
bool varlen_applies(const at::Tensor& q, const at::Tensor& k, const AttentionMask& mask);

/// Attention within each segment of the mask through LibTorch's varlen flash kernel
/// (at::_flash_attention_forward with cumulative lengths, as its nested-tensor attention calls
/// it): the block-diagonal document mask without a T × T bias, causal inside with `causal`,
/// keys fewer than `window` positions back with a window (0: none). q, k, v (B, H, T, hd) ->
/// (B, H, T, hd); a query of padding sees the padding of its row only.
at::Tensor varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionMask& mask,
                            double scale, double dropout, bool training, bool causal, int64_t window);

/// banded_attention's blocking of T positions: blocks of s = max(before, after, 1) queries,
/// n of them, each against nk keys (lo blocks before its own, hi after).
struct Band {
  Band(int64_t t, int64_t before, int64_t after);
  int64_t s, n, lo, hi, nk;
  /// The query-key scores the band computes (padding included).
  int64_t scores() const { return n * s * nk; }
};

/// Attention within a band: query i sees the real keys i − before .. i + after, and the
/// `global_key`s every query sees, at O(T·(before + after)) time and memory. The T positions
/// are cut into blocks of s = max(before, after) queries, each attending to the key blocks its
/// band reaches (Longformer's sliding chunks, Mistral's window).
///   q, k, v (B, H, T, hd) of the same T; key_ok (B, T) bool: keys in the band a query may see
///   (undefined: all); global_key, global_value (B, H, G, hd) and global_ok (B, G) bool, or undefined.
/// Equal to scaled_dot_product with the same keys masked on every query that sees at least one key.
at::Tensor banded_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_ok,
                            int64_t before, int64_t after, double scale, double dropout, bool training,
                            const at::Tensor& global_key = {}, const at::Tensor& global_value = {},
                            const at::Tensor& global_ok = {});

/// BigBird's block-sparse attention (Zaheer et al. 2020), as HF's BigBirdBlockSparseAttention:
/// the T positions (a multiple of block_size, `bs`) in nb blocks; the first and last query
/// blocks see every key, query block i of the others sees key blocks 0, i − 1, i, i + 1,
/// nb − 1 (each once) and the r blocks random_blocks (H, nb − 2, r) names for it, O(T·(5 + r)·bs).
///   q, k, v (B, H, T, hd); key_ok (B, T) bool or undefined. No dropout on the probabilities
///   (HF's has none); padded query rows (not key_ok) give 0.
at::Tensor block_sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_ok,
                                  int64_t block_size, const at::Tensor& random_blocks, double scale);

/// BigBird's random blocks for nb blocks: for each of `heads` heads and each query block i in
/// 1 .. nb − 2, r distinct blocks drawn from lmkit's generator among 1 .. nb − 2 less i − 1, i,
/// i + 1 (the window; blocks 0 and nb − 1 are global). (H, nb − 2, r) int64 on `device`.
at::Tensor draw_random_blocks(int64_t heads, int64_t blocks, int64_t r, at::Device device);

/// Causal self-attention within a sliding window of `window` positions (query i sees keys
/// i − window + 1 .. i) at O(T·window) time and memory: banded_attention with before =
/// window − 1, after 0, where it computes fewer scores than the T × T product with the
/// window's mask (T above about three windows), and that product below.
///   q, k, v (B, H, T, hd) of the same T; key_padding_mask (B, T), 1 for real keys, or undefined.
/// Equal to scaled_dot_product with attention_bias(mask, true, T, T, ..., window) on every
/// query that sees at least one key.
at::Tensor sliding_window_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& key_padding_mask, int64_t window, double scale, double dropout,
                                    bool training);

/// Keys and values of earlier positions (self-attention) or of the memory (cross-attention).
struct KVCache {
  at::Tensor key, value;  // (B, H, T_cached, hd)
  int64_t dropped = 0;    ///< positions evicted from the front (a sliding window's rolling cache)
  /// Number of keys held.
  int64_t length() const { return key.defined() ? key.size(2) : 0; }
  /// Number of positions seen: the next token's position.
  int64_t position() const { return dropped + length(); }
  /// Keeps the last `n` keys and values (a rolling cache of a sliding window).
  void keep_last(int64_t n);
  /// Appends keys and values (B, H, T, hd) after the held ones. Without autograd recording
  /// (generation runs under InferenceMode) a token appended to a held cache goes into a buffer
  /// with room to spare, doubled when full, of which `key` and `value` are views: decoding N
  /// tokens copies each key about twice, not the whole cache at every step (O(N²)). With
  /// autograd recording, for a prompt, and for a block of tokens appended to a cache not in a
  /// buffer (replaced from outside: beam search reorders it), a new tensor as concatenation.
  void append(const at::Tensor& k, const at::Tensor& v);

 private:
  at::Tensor key_buffer_, value_buffer_;  ///< (B, H, capacity, hd): key, value are views of them
  /// Positions of the buffers written so far, shared with every copy of this cache that shares
  /// them: a copy that appends first moves it, so the other's next append takes a new buffer
  /// instead of writing over the first one's keys.
  std::shared_ptr<int64_t> filled_;
  bool views_buffers() const;
};

/// Rotary positions of one call (Su et al. 2021; cos and sin from nn::rotary_cos_sin): queries
/// and keys are rotated before the cache and the kernel, so a cached key keeps its own
/// position. Undefined: no rotation.
struct Rotary {
  at::Tensor cos, sin;  ///< (1|B, 1, T, hd)
};

struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  /// Model width D of the queries (and of the output).
  TORCH_ARG(int64_t, embed_dim);
  /// Number of heads H.
  TORCH_ARG(int64_t, num_heads);
  /// Size of each head; 0 means D / H. T5 sets d_kv, so H·head_dim may differ from D.
  TORCH_ARG(int64_t, head_dim) = 0;
  /// Keys and values come from a separate memory (the encoder output).
  TORCH_ARG(bool, cross_attention) = false;
  /// Width of the memory for cross-attention; 0 means D.
  TORCH_ARG(int64_t, memory_dim) = 0;
  /// Biases on the projections (false for T5).
  TORCH_ARG(bool, bias) = true;
  /// Multiply scores by 1/sqrt(head_dim) (false for T5, which folds it into the init).
  TORCH_ARG(bool, scale_scores) = true;
  /// Dropout on the attention probabilities during training.
  TORCH_ARG(double, dropout) = 0.0;
  /// Self-attention of a causal decoder: called without a bias (see attention_bias's
  /// causal_in_kernel), it masks future keys itself, in the kernel.
  TORCH_ARG(bool, causal) = false;
  /// Kernel choice; see AttentionBackend.
  TORCH_ARG(AttentionBackend, backend) = AttentionBackend::kAuto;
  /// Self-attention: qkv's rows are grouped by head, (H, 3, hd) (BLOOM's query_key_value),
  /// instead of (3, H, hd).
  TORCH_ARG(bool, qkv_per_head) = false;
  /// Grouped-query self-attention (Ainslie et al. 2023): this many key/value heads, each
  /// shared by num_heads / kv_heads query heads (HF's repeat_kv); 0: num_heads. The cache
  /// holds kv_heads heads.
  TORCH_ARG(int64_t, kv_heads) = 0;
  /// Self-attention projects Q, K and V with three matrices `q`, `k`, `v` (Llama's q_proj,
  /// k_proj, v_proj: each a parameter of its own, as optimizers that treat a matrix whole,
  /// Muon, see them in HF) instead of one fused `qkv`.
  TORCH_ARG(bool, separate_qkv) = false;
  /// A causal sliding window (Mistral's): query i sees no key `window` or more positions
  /// before it, and the cache keeps the last window − 1 keys; 0: no window. The kernel must
  /// take one (AttentionSpec::window).
  TORCH_ARG(int64_t, window) = 0;
  /// The attention kernel (attention_kernel.h), by its registered name.
  TORCH_ARG(std::string, attention) = "full";
  /// The kernel's own settings (AttentionSettings::fields): {"linformer_k": 64}, {"local_window": 256}.
  TORCH_ARG(Json, attention_fields) = Json::object();
  /// The layer's index in its stack, and the longest input the model takes (AttentionSettings).
  TORCH_ARG(int64_t, layer) = 0;
  TORCH_ARG(int64_t, max_length) = 0;
  /// What the kernels of one stack share (Linformer's layerwise projection); null: this module's own.
  TORCH_ARG(std::shared_ptr<SharedTensors>, shared) = nullptr;
};

/// Self-attention projects Q, K, V with one fused matrix `qkv` (D -> (H + 2·KV)·hd; see
/// qkv_per_head), or with `q`, `k`, `v` (separate_qkv); cross-attention projects Q with `q`
/// and K, V with one fused `kv` (M -> 2·H·hd). HF checkpoints' separate q/k/v matrices are
/// concatenated on import (io/).
class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiHeadAttentionImpl(MultiHeadAttentionOptions options);

  /// x (B, T, D) -> (B, T, D).
  ///   mask: what each query may see (AttentionMask; an additive bias converts to one),
  ///         broadcastable to (B, H, T, Tk) where Tk counts cached keys too.
  ///   memory: (B, S, M) for cross-attention.
  ///   cache: self-attention appends this step's keys/values; cross-attention
  ///          projects the memory once and reuses it.
  ///   rotary: self-attention's rotary positions of this call's T positions.
  at::Tensor forward(const at::Tensor& x, const AttentionMask& mask = {}, const at::Tensor& memory = {},
                     KVCache* cache = nullptr, const Rotary& rotary = {});

  int64_t head_dim() const { return head_dim_; }
  int64_t inner_dim() const { return options.num_heads() * head_dim_; }
  /// The kernel: how the heads attend.
  const AttentionKernel& kernel() const { return *kernel_; }
  /// A parameter or a linear layer the kernel registered on this module by `name`
  /// ("linformer_e", "q_global"), or an undefined tensor / null module.
  at::Tensor kernel_parameter(const std::string& name) const;
  torch::nn::Linear kernel_linear(const std::string& name) const;

  MultiHeadAttentionOptions options;
  int64_t kv_heads() const { return kv_heads_; }
  torch::nn::Linear qkv{nullptr};  ///< self-attention: weight ((H + 2·KV)·hd, D)
  torch::nn::Linear q{nullptr};    ///< cross-attention, separate_qkv: weight (H·hd, D)
  torch::nn::Linear k{nullptr};    ///< separate_qkv: weight (KV·hd, D)
  torch::nn::Linear v{nullptr};    ///< separate_qkv: weight (KV·hd, D)
  torch::nn::Linear kv{nullptr};   ///< cross-attention: weight (2·H·hd, M)
  torch::nn::Linear out{nullptr};  ///< weight (D, H·hd)

 private:
  /// (B, T, n·H·hd) -> n tensors (B, H, T, hd)
  std::vector<at::Tensor> split_heads(const at::Tensor& x, int64_t n) const;
  /// Self-attention's queries (B, H, T, hd), keys and values (B, KV, T, hd) of x.
  std::vector<at::Tensor> project_self(const at::Tensor& x) const;
  int64_t head_dim_, kv_heads_;
  std::unique_ptr<AttentionKernel> kernel_;
};
TORCH_MODULE(MultiHeadAttention);

}  // namespace lmkit::nn
