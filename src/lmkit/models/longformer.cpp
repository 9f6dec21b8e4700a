#include "lmkit/models/longformer.h"

#include "lmkit/models/family.h"
#include "lmkit/models/roberta.h"

namespace lmkit::models {

BertConfig longformer_defaults() {
  BertConfig c;
  c.model_type = "longformer";
  c.head = BertHead::kMaskedLm;
  c.pad_token_id = 1;
  c.sep_token_id = 2;
  c.attention_window = {512};
  return c;
}

Family longformer_family() {
  Family f = roberta_style_family<LongformerImpl>("longformer", longformer_defaults);
  f.summary = "Longformer (Beltagy et al. 2020): RoBERTa with a local attention window and global tokens";
  f.objectives = {{"mlm", "LongformerForMaskedLM"}};
  return f;
}

}  // namespace lmkit::models
