// BigBird (Zaheer et al. 2020) as HF's BigBirdModel and its heads: BERT's model (bert.h,
// config.model_type "big_bird") whose self-attention is block-sparse (attention_type
// "block_sparse": nn::block_sparse_attention, global first and last blocks, a sliding window
// of three blocks and num_random_blocks random ones, O(T·(5 + r)·block_size)) or full
// ("original_full"). An input of at most (5 + 2·num_random_blocks)·block_size positions takes
// full attention, as HF's does. Every head keeps BigBirdModel's pooler; the sequence classifier
// is dense -> hidden_act -> out_proj on the first token. Heads: kNone, kPreTraining (MLM + NSP),
// kMaskedLm, kSequenceClassification, kTokenClassification.
#pragma once

#include "lmkit/models/bert.h"

namespace lmkit::models {

/// BigBirdConfig's defaults (google/bigbird-roberta-base's shape): BertConfig's keys with
/// vocab 50358, gelu_new, 4,096 positions, sep 66, block_size 64, 3 random blocks.
BertConfig big_bird_defaults();

/// What the big_bird family builds: a BertImpl of a BigBird config.
class BigBirdImpl : public BertImpl {
 public:
  explicit BigBirdImpl(BertConfig config) : BertImpl(std::move(config)) {}
};
TORCH_MODULE(BigBird);

struct Family;
/// The big_bird family (family.h).
Family big_bird_family();

}  // namespace lmkit::models
