// Objective names to datasets: what the apps and benchmarks share.
#pragma once

#include <memory>
#include <string>

#include "lmkit/data/objectives.h"

namespace lmkit::data {

enum class Objective { kMlm, kMlmNsp, kSpan, kClm };
/// mlm, mlm+nsp, span, clm (InputError otherwise).
Objective parse_objective(const std::string& name);
std::string objective_name(Objective objective);

/// The pretraining dataset for an objective over a corpus.
std::shared_ptr<Dataset> make_pretraining_dataset(Objective objective, std::shared_ptr<const Corpus> corpus,
                                                  const tokenizer::Tokenizer& tokenizer, int64_t seq_len, uint64_t seed,
                                                  const MaskingOptions& masking = {});

/// The padding id for a tokenizer's family (GPT-2 has none: its EOS, masked out).
int32_t pad_id(const tokenizer::Tokenizer& tokenizer);

}  // namespace lmkit::data
