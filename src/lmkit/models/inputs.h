// Kept for code written against lmkit 0.1.0's header: the name moved to core/batch.h,
// where data/ and models/ meet.
#pragma once

#include "lmkit/core/batch.h"

namespace lmkit::models {

using lmkit::kNextSentenceLabel;

}  // namespace lmkit::models
