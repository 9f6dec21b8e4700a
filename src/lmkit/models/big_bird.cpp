#include "lmkit/models/big_bird.h"

#include "lmkit/models/encoder_heads.h"
#include "lmkit/models/family.h"

namespace lmkit::models {

BertConfig big_bird_defaults() {
  BertConfig c;
  c.model_type = "big_bird";
  c.head = BertHead::kMaskedLm;
  c.vocab_size = 50358;
  c.hidden_act = "gelu_new";
  c.max_position_embeddings = 4096;
  c.sep_token_id = 66;
  return c;
}

Family big_bird_family() {
  Family f;
  f.model_type = "big_bird";
  f.summary = "BigBird (Zaheer et al. 2020): BERT with block-sparse attention (global, window and random blocks)";
  f.architectures = bert_architectures("big_bird").names();
  f.heads = bert_architectures("big_bird").heads();
  f.objectives = {{"mlm", "BigBirdForMaskedLM"}, {"mlm+nsp", "BigBirdForPreTraining"}};
  f.tokenizer_family = "big_bird";  // HF's BigBirdTokenizer: SentencePiece, [CLS] A [SEP]
  f.positions_key = "max_position_embeddings";
  auto config_of = [](const Json& j, const std::string& file) { return BertConfig::from_json(j, file, big_bird_defaults()); };
  f.max_length_of = [config_of](const Json& config) { return bert_max_length(config_of(config, "config.json")); };
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = family_creator<BigBirdImpl, BertConfig>(bert_architectures("big_bird"), config_of);
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t) {
    config["vocab_size"] = vocab_size;
    config["pad_token_id"] = pad;
  };
  return f;
}

}  // namespace lmkit::models
