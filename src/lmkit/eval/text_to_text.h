// Text-to-text evaluation: a model's generations for a Seq2SeqDataset's prompts,
// scored against its targets (BLEU, SQuAD exact match and F1, ROUGE-1/2/L), and
// the predictions file (one generated text per line, in data order).
#pragma once

#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/data/tasks.h"
#include "lmkit/eval/generation.h"
#include "lmkit/models/model.h"

namespace lmkit::eval {

/// Greedy for beams <= 1, else beam search of that width; at most max_new_tokens
/// tokens (0: the target length).
GenerationOptions text_generation_options(int64_t beams, int64_t max_new_tokens, int64_t max_target_length);

/// The metrics generation_scores computes, as lmkit-finetune's dev figures and
/// lmkit-evaluate --metric generation report them: bleu, exact_match, f1, rouge1,
/// rouge2, rougeL (0–100; over Porter-stemmed tokens with `rouge_stemmer`), examples,
/// and the truncated sources and targets.
Json evaluate_text_to_text(models::Model& model, const tokenizer::Tokenizer& tokenizer, const data::Seq2SeqDataset& dataset,
                           const GenerationOptions& options, int64_t batch_size, int32_t pad_id, c10::Device device,
                           std::vector<std::string>* predictions = nullptr, bool rouge_stemmer = false);

/// One prediction per line; a line break inside a generated text becomes a space so
/// that line i stays example i.
std::string predictions_lines(const std::vector<std::string>& predictions);

}  // namespace lmkit::eval
