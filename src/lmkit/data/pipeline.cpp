#include "lmkit/data/pipeline.h"

#include "lmkit/core/error.h"

namespace lmkit::data {

Objective parse_objective(const std::string& name) {
  if (name == "mlm") return Objective::kMlm;
  if (name == "mlm+nsp") return Objective::kMlmNsp;
  if (name == "span") return Objective::kSpan;
  if (name == "clm") return Objective::kClm;
  throw InputError("unknown objective '" + name + "' (expected mlm, mlm+nsp, span or clm)");
}

std::string objective_name(Objective objective) {
  switch (objective) {
    case Objective::kMlm: return "mlm";
    case Objective::kMlmNsp: return "mlm+nsp";
    case Objective::kSpan: return "span";
    case Objective::kClm: return "clm";
  }
  return "";
}

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
