// lmkit's own finetuning tasks (task.cpp) and metrics (metric.cpp), registered first.
#pragma once

#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"

namespace lmkit::tasks {

/// Sequence(-pair) classification, or regression with --regression (GLUE).
TaskSpec classification_task();
/// A tag per word (CoNLL-2003 NER), scored by seqeval's entity F1.
TaskSpec token_classification_task();
/// Text-to-text generation (translation, summarisation, QA as text).
TaskSpec text_to_text_task();
/// Extractive question answering (SQuAD v1.1 and v2.0), scored by SQuAD's official scripts.
TaskSpec question_answering_task();
/// A class per image (ViT on IDX images: MNIST, Fashion-MNIST), scored as classification.
TaskSpec image_classification_task();

/// lmkit-evaluate's own metrics (builtin_metrics.cpp): the corpus metrics (perplexity,
/// mlm-perplexity, pseudo-perplexity, span, objective), bleu and the in-context three.
std::vector<MetricSpec> builtin_metrics();
/// The metric of finetuning task `task`: its evaluate, on the data as finetune.json records.
Json run_task_metric(const MetricInputs& inputs, const std::string& task);

}  // namespace lmkit::tasks
