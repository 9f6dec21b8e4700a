#include "lmkit/models/roberta.h"

#include "lmkit/models/encoder_heads.h"
#include "lmkit/models/family.h"

namespace lmkit::models {

BertConfig roberta_defaults() {
  BertConfig c;
  c.model_type = "roberta";
  c.head = BertHead::kMaskedLm;
  c.vocab_size = 50265;
  c.max_position_embeddings = 514;
  c.type_vocab_size = 1;
  c.layer_norm_eps = 1e-5;
  c.pad_token_id = 1;
  return c;
}

BertConfig roberta_config(const Json& j, const std::string& file) {
  BertConfig c = BertConfig::from_json(j, file, roberta_defaults());
  if (c.max_position_embeddings <= c.pad_token_id + 1) {
    throw InputError(file + ": key 'max_position_embeddings' = " + std::to_string(c.max_position_embeddings) +
                     " leaves no position after pad_token_id " + std::to_string(c.pad_token_id) +
                     " (RoBERTa's positions count from it: at least " + std::to_string(c.pad_token_id + 2) + ")");
  }
  return c;
}

Family roberta_family() {
  Family f;
  f.model_type = "roberta";
  f.architectures = bert_architectures("roberta").names();
  f.heads = bert_architectures("roberta").heads();
  f.objectives = {{"mlm", "RobertaForMaskedLM"}, {"mlm+sbo", "RobertaForSpanPreTraining"}};
  f.tokenizer_family = "roberta";
  f.positions_key = "max_position_embeddings";
  f.max_length_of = [](const Json& config) { return bert_max_length(roberta_config(config, "config.json")); };
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = family_creator<RobertaImpl, BertConfig>(bert_architectures("roberta"), roberta_config);
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t) {
    config["vocab_size"] = vocab_size;
    config["pad_token_id"] = pad;  // positions count from it
  };
  return f;
}

}  // namespace lmkit::models
