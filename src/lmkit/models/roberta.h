// RoBERTa (Liu et al. 2019) as HF's RobertaModel and its heads: BERT's model (bert.h) with
// config.model_type "roberta" — positions counted from padding_idx + 1 over the non-padding
// tokens (HF's create_position_ids_from_input_ids), one token type, an LM head named lm_head
// (dense, GELU, LayerNorm, tied decoder) and a two-layer classification head on <s> instead
// of BERT's pooler. The config is BERT's, with RoBERTa's defaults. Its heads are BERT's less
// pretraining: kNone (with the pooler), kMaskedLm, kSequenceClassification, kSpanPreTraining
// and kTokenClassification.
#pragma once

#include <string>

#include "lmkit/models/bert.h"

namespace lmkit::models {

/// RobertaConfig's defaults (roberta-base): BertConfig's keys.
BertConfig roberta_defaults();
/// The defaults of `model_type`'s config: BertConfig's, roberta_defaults() or longformer_defaults().
BertConfig encoder_defaults(const std::string& model_type);
/// A RoBERTa config.json read over those defaults, with the positions that padding_idx
/// leaves checked (InputError naming `file`); `defaults` Longformer's.
BertConfig roberta_config(const Json& j, const std::string& file, BertConfig defaults = roberta_defaults());

/// What the roberta family builds: a BertImpl of a RoBERTa config.
class RobertaImpl : public BertImpl {
 public:
  explicit RobertaImpl(BertConfig config) : BertImpl(std::move(config)) {}
};
TORCH_MODULE(Roberta);

struct Family;
/// The roberta family (family.h).
Family roberta_family();
/// What the RoBERTa-style families (roberta, longformer) share: architectures, the roberta
/// tokenizer, positions from padding_idx, the config read over `defaults()`, `Impl` the model
/// (RobertaImpl or LongformerImpl, instantiated in roberta.cpp); the objectives are the family's.
template <class Impl>
Family roberta_style_family(const std::string& model_type, BertConfig (*defaults)());

}  // namespace lmkit::models
