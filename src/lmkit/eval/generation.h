// Text generation for GPT, T5 and the Transformer: greedy, temperature /
// top-k / top-p sampling (seeded), and beam search with a length penalty, all
// on the model's KV cache, stopping at EOS or after max_new_tokens.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lmkit/models/model.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::eval {

enum class Search { kGreedy, kSample, kBeam };

/// The most tokens one generation may add to a model without a position limit (T5's
/// relative positions): a bound for --max-new-tokens where the positions give none
/// (docs/evaluate.md), so that a mistyped 1000000 is an error, not an hour of decoding.
inline constexpr int64_t kMaxNewTokensWithoutPositions = 4096;

struct GenerationOptions {
  int64_t max_new_tokens = 32;
  Search search = Search::kGreedy;
  double temperature = 1.0;   ///< sampling: logits divided by this
  int64_t top_k = 0;          ///< sampling: keep the k most likely tokens (0: all)
  double top_p = 1.0;         ///< sampling: keep the smallest set with probability >= p
  uint64_t seed = 0;          ///< sampling: the same seed gives the same tokens
  int64_t num_beams = 4;      ///< beam search width
  double length_penalty = 1.0;///< beam scores are sum log p / length^penalty (HF's convention)
  bool stop_at_eos = true;    ///< a row ends at the model's EOS (included in its output)
  bool use_cache = true;      ///< false re-runs the whole sequence each step (same tokens, slower)
};

/// Generates continuations of `input_ids` (B, T): prompts for decoder-only models
/// (unpadded), encoder inputs for encoder–decoder ones (`attention_mask` may mark
/// padding). Returns each row's new tokens, prompt and decoder start excluded.
std::vector<std::vector<int64_t>> generate(models::Model& model, const at::Tensor& input_ids,
                                           const at::Tensor& attention_mask, const GenerationOptions& options);

/// Keeps the top-k logits and the top-p nucleus of (B, V) logits, setting the rest to -inf
/// (HF's TopKLogitsWarper and TopPLogitsWarper; at least one token always survives).
at::Tensor filter_logits(const at::Tensor& logits, int64_t top_k, double top_p);

/// Generates from each of `prompts` — encoder inputs of an encoder–decoder model,
/// `batch_size` at a time, right-padded with `pad_id` and masked; prompts of a
/// decoder-only model in batches of equal length (no padding) — and returns each
/// one's new tokens detokenized, in order, the EOS that ends a row dropped.
std::vector<std::string> generate_texts(models::Model& model, const tokenizer::Tokenizer& tokenizer,
                                        const std::vector<std::vector<int32_t>>& prompts, const GenerationOptions& options,
                                        int64_t batch_size, int32_t pad_id, c10::Device device);

/// Translates each source line with the model (an encoder-decoder): the line encoded
/// with `tokenizer` plus EOS, decoded as `options` says, EOS dropped, detokenized.
std::vector<std::string> translate(models::Model& model, const tokenizer::Tokenizer& tokenizer,
                                   const std::vector<std::string>& sources, const GenerationOptions& options,
                                   c10::Device device);

}  // namespace lmkit::eval
