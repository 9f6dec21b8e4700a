// Longformer (Beltagy et al. 2020) as HF's LongformerModel and its heads: RoBERTa's model
// (bert.h, config.model_type "longformer") whose self-attention sees attention_window / 2
// keys either side (nn::banded_attention, O(T·w)) and the global tokens a batch's
// global_attention_mask marks, which see every key through their own projections
// (query_global, key_global, value_global). The sequence classifier puts global attention
// on <s> when a batch marks none, as HF's does. Heads: kNone (with the pooler), kMaskedLm,
// kSequenceClassification, kTokenClassification.
#pragma once

#include "lmkit/models/bert.h"

namespace lmkit::models {

/// LongformerConfig's defaults: BertConfig's keys with pad 1, attention_window 512, sep 2.
BertConfig longformer_defaults();

/// What the longformer family builds: a BertImpl of a Longformer config.
class LongformerImpl : public BertImpl {
 public:
  explicit LongformerImpl(BertConfig config) : BertImpl(std::move(config)) {}
};
TORCH_MODULE(Longformer);

struct Family;
/// The longformer family (family.h).
Family longformer_family();

}  // namespace lmkit::models
