#include "lmkit/data/pipeline.h"

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"

namespace lmkit::data {

const NameTable<Objective>& objective_names() {
  static const NameTable<Objective> table{"objective", {{"mlm", Objective::kMlm},
                                                        {"mlm+nsp", Objective::kMlmNsp},
                                                        {"span", Objective::kSpan},
                                                        {"clm", Objective::kClm}}};
  return table;
}

Objective parse_objective(const std::string& name) { return objective_names().parse(name); }

std::string objective_name(Objective objective) { return objective_names().name(objective); }

std::shared_ptr<Dataset> make_pretraining_dataset(Objective objective, std::shared_ptr<const Corpus> corpus,
                                                  const tokenizer::Tokenizer& tok, int64_t seq_len, uint64_t seed,
                                                  const MaskingOptions& masking) {
  switch (objective) {
    case Objective::kMlm: return std::make_shared<MaskedLmDataset>(corpus, tok, seq_len, masking, seed);
    case Objective::kMlmNsp: return std::make_shared<NextSentenceDataset>(corpus, tok, seq_len, masking, seed);
    case Objective::kSpan: return std::make_shared<SpanCorruptionDataset>(corpus, tok, seq_len, seed);
    case Objective::kClm: return std::make_shared<CausalLmDataset>(corpus, tok, seq_len);
  }
  throw InputError("unknown objective");
}

int32_t pad_id(const tokenizer::Tokenizer& tok) {
  return tok.specials().pad >= 0 ? tok.specials().pad : tok.specials().eos;
}

}  // namespace lmkit::data
