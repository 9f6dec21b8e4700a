#include "lmkit/models/roberta.h"

#include "lmkit/models/encoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/big_bird.h"
#include "lmkit/models/longformer.h"

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

BertConfig encoder_defaults(const std::string& model_type) {
  if (model_type == "longformer") return longformer_defaults();
  if (model_type == "big_bird") return big_bird_defaults();
  return model_type == "roberta" ? roberta_defaults() : BertConfig();
}

BertConfig roberta_config(const Json& j, const std::string& file, BertConfig defaults) {
  BertConfig c = BertConfig::from_json(j, file, std::move(defaults));
  if (c.max_position_embeddings <= c.pad_token_id + 1) {
    throw InputError(file + ": key 'max_position_embeddings' = " + std::to_string(c.max_position_embeddings) +
                     " leaves no position after pad_token_id " + std::to_string(c.pad_token_id) +
                     " (RoBERTa's positions count from it: at least " + std::to_string(c.pad_token_id + 2) + ")");
  }
  return c;
}

template <class Impl>
Family roberta_style_family(const std::string& model_type, BertConfig (*defaults)()) {
  Family f;
  f.model_type = model_type;
  f.architectures = bert_architectures(model_type).names();
  f.heads = bert_architectures(model_type).heads();
  f.tokenizer_family = "roberta";  // HF's LongformerTokenizer is RoBERTa's byte-level BPE too
  f.positions_key = "max_position_embeddings";
  auto config_of = [defaults](const Json& j, const std::string& file) { return roberta_config(j, file, defaults()); };
  f.max_length_of = [config_of](const Json& config) { return bert_max_length(config_of(config, "config.json")); };
  f.metrics = {"mlm-perplexity", "pseudo-perplexity"};
  f.create = family_creator<Impl, BertConfig>(bert_architectures(model_type), config_of);
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t pad, int32_t) {
    config["vocab_size"] = vocab_size;
    config["pad_token_id"] = pad;  // positions count from it
  };
  return f;
}
template Family roberta_style_family<RobertaImpl>(const std::string&, BertConfig (*)());
template Family roberta_style_family<LongformerImpl>(const std::string&, BertConfig (*)());

Family roberta_family() {
  Family f = roberta_style_family<RobertaImpl>("roberta", roberta_defaults);
  f.summary = "RoBERTa (Liu et al. 2019): BERT's encoder with byte-level BPE ids and offset positions";
  f.objectives = {{"mlm", "RobertaForMaskedLM"}, {"mlm+sbo", "RobertaForSpanPreTraining"}};
  return f;
}

}  // namespace lmkit::models
