// The inputs a model reads beyond Batch's own fields (Batch::extra), each named once
// here: the objective that makes one (data/) and the model that reads it (models/)
// share the name, and core/ knows neither. An objective with a new kind of label adds
// its name here and in the model that reads it.
#pragma once

namespace lmkit::models {

/// Next-sentence prediction: (B) int64, 0 = segment B follows A, 1 = B is random (HF's name).
inline constexpr const char* kNextSentenceLabel = "next_sentence_label";

}  // namespace lmkit::models
