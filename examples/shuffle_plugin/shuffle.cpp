// A token-shuffle detection objective as an lmkit plugin: in each block of text, 15% of
// the positions swap their tokens among themselves, and the model labels every token
// 1 (moved here) or 0 (in place). BERT learns it with its token-classification head:
//   lmkit-pretrain --plugin liblmkit_shuffle.so --objective shuffle --model bert-mini.json ...
#include <algorithm>

#include <ATen/ATen.h>

#include "lmkit/core/plugin.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/dataset.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace {

using namespace lmkit;

// Block i is the corpus's tokens [i * (seq_len - 2), ...) between [CLS] and [SEP].
class ShuffleDataset : public data::Dataset {
 public:
  ShuffleDataset(std::shared_ptr<const data::Corpus> corpus, const tokenizer::Tokenizer& tok, int64_t seq_len, uint64_t seed)
      : corpus_(std::move(corpus)), cls_(tok.specials().cls), sep_(tok.specials().sep), body_(seq_len - 2), seed_(seed) {}

  int64_t size(int64_t) const override { return corpus_->num_tokens() / body_; }

  data::Example get(int64_t index, int64_t epoch) const override {
    std::vector<int32_t> tokens;
    corpus_->append_tokens(index * body_, (index + 1) * body_, tokens);
    // Which positions move, and where to: a pure function of (seed, epoch, index), so a resumed run sees the same.
    auto rng = data::example_rng(seed_, epoch, index);
    std::vector<int64_t> chosen;
    for (int64_t i = 0; i < body_; ++i) {
      if (data::uniform_int(rng, 0, 99) < 15) chosen.push_back(i);
    }
    std::vector<int64_t> moved = chosen;
    for (int64_t i = static_cast<int64_t>(moved.size()) - 1; i > 0; --i) std::swap(moved[i], moved[data::uniform_int(rng, 0, i)]);
    std::vector<int32_t> shuffled = tokens;
    for (size_t k = 0; k < chosen.size(); ++k) shuffled[chosen[k]] = tokens[moved[k]];

    data::Example e;
    e.input_ids.push_back(cls_);
    e.labels.push_back(-100);
    for (int64_t i = 0; i < body_; ++i) {
      e.input_ids.push_back(shuffled[i]);
      e.labels.push_back(shuffled[i] != tokens[i] ? 1 : 0);  // a swap of two equal tokens changes nothing
    }
    e.input_ids.push_back(sep_);
    e.labels.push_back(-100);
    e.token_type_ids.assign(e.input_ids.size(), 0);
    return e;
  }

 private:
  std::shared_ptr<const data::Corpus> corpus_;
  int32_t cls_, sep_;
  int64_t body_;
  uint64_t seed_;
};

void register_shuffle() {
  data::ObjectiveSpec spec;
  spec.name = "shuffle";
  spec.summary = "token-shuffle detection: 15% of each block's tokens swap places; label each token moved or not";
  spec.needs = {"cls", "sep"};
  spec.num_classes = 2;  // 0 in place, 1 moved: BERT's token classifier with two labels; runs report accuracy
  spec.make_dataset = [](const data::ObjectiveInputs& in) -> std::shared_ptr<data::Dataset> {
    return std::make_shared<ShuffleDataset>(in.corpus, *in.tokenizer, in.seq_len, in.seed);
  };
  // lmkit-bench's batches (optional; without it the bench refuses the objective): random ids,
  // about 15% of the positions labelled moved, none at [CLS] and [SEP].
  spec.synthetic_batch = [](int64_t batch, int64_t seq_len, int64_t, int64_t vocab) {
    Batch b;
    b.input_ids = at::randint(5, vocab, {batch, seq_len}, at::kLong);
    b.attention_mask = at::ones({batch, seq_len}, at::kLong);
    b.labels = at::rand({batch, seq_len}).lt(0.15).to(at::kLong);
    b.labels.select(1, 0).fill_(-100), b.labels.select(1, seq_len - 1).fill_(-100);
    return b;
  };
  data::register_objective(spec);
  // BERT pretrains with it as its token classifier.
  models::add_family_objective("bert", {"shuffle", "BertForTokenClassification"});
}

}  // namespace

LMKIT_PLUGIN(register_shuffle)
