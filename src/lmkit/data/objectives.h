// The pretraining objectives over a token corpus. Each is a Dataset whose
// examples are pure functions of (index, epoch, seed); see docs/data.md for a
// worked example of each.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "lmkit/data/corpus.h"
#include "lmkit/data/dataset.h"
#include "lmkit/data/masking.h"

namespace lmkit::data {

/// How packed blocks keep their documents apart (--document-mask, --reset-positions).
struct PackingOptions {
  /// Each token attends only within its document (Example::document_ids; the separator ends
  /// the document before it); the causal LM then has no target across a boundary.
  bool document_mask = false;
  bool reset_positions = false;  ///< positions restart at each document (Example::position_ids)
  int64_t first_position = 0;    ///< the position a document starts at (models::Model::first_position())
  bool any() const { return document_mask || reset_positions; }
};

/// Sets e.document_ids and e.position_ids (as `packing` asks) from each input token's
/// document, `documents` (non-decreasing, one per e.input_ids); with the document mask and
/// `shifted` (a causal LM: label t is predicted at t − 1), the first label of each document
/// after the row's first becomes -100.
void pack_documents(Example& e, const std::vector<int32_t>& documents, const PackingOptions& packing, bool shifted);

/// The corpus as one stream with a separator token after every document
/// (GPT's `<|endoftext|>`, T5's `</s>`, BERT's [SEP]), read by position.
class PackedStream {
 public:
  PackedStream(std::shared_ptr<const Corpus> corpus, int32_t separator);
  int64_t size() const { return size_; }
  /// Appends stream positions [begin, end) to `out`; with `documents`, each token's document
  /// (counted from the first one read, 0) to it (a separator belongs to the document it ends).
  void read(int64_t begin, int64_t end, std::vector<int32_t>& out, std::vector<int32_t>* documents = nullptr) const;

 private:
  std::shared_ptr<const Corpus> corpus_;
  int32_t separator_;
  int64_t size_;
};

/// Masked LM (Devlin et al. 2018; the FULL-SENTENCES packing of Liu et al. 2019):
/// `[CLS] block [SEP]`, blocks of seq_len − 2 consecutive stream tokens
/// (documents separated by [SEP]), masked anew each epoch.
class MaskedLmDataset : public Dataset {
 public:
  MaskedLmDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tokenizer, int64_t seq_len,
                  MaskingOptions masking, uint64_t seed, PackingOptions packing = {});
  int64_t size(int64_t) const override { return num_blocks_; }
  Example get(int64_t index, int64_t epoch) const override;

 private:
  const tokenizer::Tokenizer& tok_;
  PackedStream stream_;
  int64_t seq_len_, num_blocks_;
  MaskingOptions masking_;
  uint64_t seed_;
  PackingOptions packing_;
};

/// BERT's pre-training pairs, as google-research/bert's create_pretraining_data.py:
/// `[CLS] A [SEP] B [SEP]` with token types 0/1, A a run of whole sentences of
/// one document, B its continuation (label 0) or, half the time, sentences from
/// a different random document (label 1; A's unused sentences go back); target
/// length seq_len − 3, shorter with probability short_seq_prob; pairs trimmed
/// by truncate_seq_pair; then masked. The pairing is redrawn each epoch.
/// One deviation: a one-sentence chunk that draws IsNext takes the next
/// sentence as B (Google forces a random B there, which biases IsNext below 50%).
class NextSentenceDataset : public Dataset {
 public:
  NextSentenceDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tokenizer, int64_t seq_len,
                      MaskingOptions masking, uint64_t seed, double short_seq_prob = 0.1);
  int64_t size(int64_t epoch) const override;
  Example get(int64_t index, int64_t epoch) const override;

  /// One pair: sentence ranges [a_begin, a_end) and [b_begin, b_end).
  struct Pair {
    int64_t a_begin, a_end, b_begin, b_end;
    bool random_next;
  };
  /// The pairs of an epoch, in the order google-research/bert creates them; an
  /// immutable snapshot that stays valid when another epoch replaces the cache.
  std::shared_ptr<const std::vector<Pair>> plan(int64_t epoch) const;

 private:
  std::shared_ptr<const Corpus> corpus_;
  const tokenizer::Tokenizer& tok_;
  int64_t seq_len_;
  MaskingOptions masking_;
  uint64_t seed_;
  double short_seq_prob_;
  mutable std::mutex mutex_;
  mutable int64_t plan_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<Pair>> plan_;
};

/// T5 span corruption (Raffel et al. 2020): noise density 0.15, mean span 3.
/// Each example is raw_length consecutive stream tokens (documents separated by
/// `</s>`); noise spans become sentinels `<extra_id_0>`, `<extra_id_1>`, ... (ids
/// counting down from the top of the vocabulary) in the input, and the target
/// is sentinel + span for each span, then `</s>`. Lengths follow T5's
/// compute_input_and_target_lengths: input_length 512 -> 568 raw tokens, 114 targets.
class SpanCorruptionDataset : public Dataset {
 public:
  SpanCorruptionDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tokenizer,
                        int64_t input_length, uint64_t seed, double noise_density = 0.15, double mean_span = 3.0);
  int64_t size(int64_t) const override { return num_examples_; }
  Example get(int64_t index, int64_t epoch) const override;
  int64_t raw_length() const { return raw_length_; }
  int64_t target_length() const { return target_length_; }

 private:
  const tokenizer::Tokenizer& tok_;
  PackedStream stream_;
  int64_t input_length_, raw_length_, target_length_, num_examples_;
  uint64_t seed_;
  double noise_density_, mean_span_;
};

/// T5's compute_input_and_target_lengths: the raw token count whose corruption
/// gives `input_length` inputs, and the resulting target length.
std::pair<int64_t, int64_t> span_corruption_lengths(int64_t input_length, double noise_density, double mean_span);

/// T5's random_spans_noise_mask: a noise mask over `length` tokens (true = noise).
std::vector<bool> random_spans_noise_mask(int64_t length, double noise_density, double mean_span, std::mt19937_64& rng);

/// Causal LM (Radford et al.): consecutive blocks of seq_len stream tokens,
/// documents separated by `<|endoftext|>`; labels = inputs (the model shifts).
class CausalLmDataset : public Dataset {
 public:
  CausalLmDataset(std::shared_ptr<const Corpus> corpus, const tokenizer::Tokenizer& tokenizer, int64_t seq_len,
                  PackingOptions packing = {});
  int64_t size(int64_t) const override { return num_blocks_; }
  Example get(int64_t index, int64_t epoch) const override;

 private:
  PackedStream stream_;
  int64_t seq_len_, num_blocks_;
  PackingOptions packing_;
};

/// The separator each family puts between documents.
int32_t document_separator(const tokenizer::Tokenizer& tokenizer);

}  // namespace lmkit::data
