// lmkit's own finetuning tasks, registered first (task.cpp).
#pragma once

#include "lmkit/tasks/task.h"

namespace lmkit::tasks {

/// Sequence(-pair) classification, or regression with --regression (GLUE).
TaskSpec classification_task();
/// A tag per word (CoNLL-2003 NER), scored by seqeval's entity F1.
TaskSpec token_classification_task();
/// Text-to-text generation (translation, summarisation, QA as text).
TaskSpec text_to_text_task();

}  // namespace lmkit::tasks
