// Language-model evaluation on text: causal perplexity with a sliding window,
// masked-LM perplexity over a fixed seeded masking, pseudo-perplexity (every
// token masked once), and T5 span-corruption loss.
#pragma once

#include <memory>
#include <string>

#include "lmkit/core/config.h"
#include "lmkit/data/corpus.h"
#include "lmkit/models/model.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::eval {

/// What a text file, or a directory or pattern of shards (data::text_files), holds besides its
/// tokens, for per-word and per-byte figures.
struct TextStats {
  int64_t words = 0;  ///< whitespace-separated words, plus one per document end (the end-of-text token there)
  int64_t bytes = 0;  ///< UTF-8 bytes
};
TextStats text_stats(const std::string& path, const std::string& text_field = "text");

struct SlidingWindow {
  int64_t context = 0;  ///< tokens per window (0: the model's maximum)
  int64_t stride = 0;   ///< window start step (0: = context, i.e. non-overlapping chunks)
  int64_t batch_size = 8;
  /// Each document (with its separator) scored alone: no window crosses a document's end and
  /// a document's first token is not scored (what a model trained with the document mask is
  /// asked; the same question for one trained without it).
  bool per_document = false;
};

/// Causal-LM perplexity over the corpus stream (documents separated by EOS), as
/// HF's sliding-window recipe: each window scores only its last `stride`
/// tokens (the first window all of them but its first), so every token after
/// the first is scored exactly once with up to `context` tokens of history.
/// With `per_document`, the same within each document alone (+ "documents").
/// Returns loss (mean NLL per scored token), perplexity, tokens (scored), and
/// with `stats`: word_perplexity = exp(loss · stream tokens / words) and
/// bits_per_byte = loss · stream tokens / (ln 2 · bytes).
Json causal_perplexity(models::Model& model, const data::Corpus& corpus, int32_t separator, const SlidingWindow& window,
                       c10::Device device, const TextStats* stats = nullptr);

/// Masked-LM loss and perplexity over a fixed 15% masking (seed 0, epoch 0) of
/// [CLS] block [SEP] sequences: the same masks for every checkpoint.
Json masked_lm_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus,
                          const tokenizer::Tokenizer& tokenizer, int64_t seq_len, int64_t batch_size, c10::Device device);

/// Pseudo-perplexity (Salazar et al. 2020): every non-special token of each
/// [CLS] block [SEP] sequence masked once, alone; exp(−mean log p). At most
/// `max_sequences` sequences (0: all).
Json pseudo_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus,
                       const tokenizer::Tokenizer& tokenizer, int64_t seq_len, int64_t max_sequences, c10::Device device);

/// T5 span-corruption loss and perplexity per target token over a fixed corruption (seed 0).
Json span_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus,
                     const tokenizer::Tokenizer& tokenizer, int64_t input_length, int64_t batch_size, c10::Device device);

}  // namespace lmkit::eval
