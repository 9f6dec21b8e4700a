// Extractive question answering's evaluation: the answer of each question from its windows'
// start and end logits (HF run_qa's postprocess_qa_predictions), and SQuAD's official
// scores of the answers — evaluate-v1.1.py's exact match and F1 (the best over the ground
// truths), or evaluate-v2.0.py's with unanswerable questions (an empty answer is right for
// them: HasAns_ and NoAns_ figures beside the overall ones).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "lmkit/core/config.h"
#include "lmkit/data/squad.h"

namespace lmkit::models {
class Model;
}

namespace lmkit::eval {

struct AnswerOptions {
  int64_t n_best = 20;             ///< start and end candidates per window, and answers kept
  int64_t max_answer_length = 30;  ///< tokens
  bool with_negative = false;      ///< SQuAD v2.0: "" when the null score wins
  double null_threshold = 0.0;     ///< v2.0: "" when null score − best span's score exceeds it
};

/// One question's answer and the margin v2.0 decided on.
struct Answer {
  std::string text;
  double null_margin = 0;  ///< null score − the best span's score (v2.0; 0 otherwise)
};

/// Each question's answer from its features' logits (`start[i]`, `end[i]`: the logits of
/// feature i, of its own length), as HF's postprocess_qa_predictions: the n_best start and
/// end tokens of each window, spans inside the context with end >= start and at most
/// max_answer_length tokens, scored by the sum of the two logits; the text from the start
/// word's first character to the end word's last. v2.0: the smallest [CLS] score over the
/// windows is the null answer's. No span at all: "empty", as HF's.
std::vector<Answer> best_answers(const data::QuestionAnsweringDataset& dataset, const std::vector<std::vector<float>>& start,
                                 const std::vector<std::vector<float>>& end, const AnswerOptions& options);

/// SQuAD's official figures (0–100) of `answers` (by question id) on `set`: v1.1's
/// exact_match, f1 and total; with `v2`, evaluate-v2.0.py's exact, f1, total and HasAns_/
/// NoAns_ exact, f1, total (a question without non-empty gold answers is right with "").
/// A question missing from `answers` is an InputError (v2.0's script needs them all; v1.1's
/// would count it wrong).
Json squad_scores(const data::SquadSet& set, const std::map<std::string, std::string>& answers, bool v2);

/// SQuAD v2.0's token F1 of one answer: v1.1's, but an empty gold or prediction scores 1
/// when both are empty and 0 otherwise.
double squad_v2_f1(const std::string& prediction, const std::string& truth);

/// Runs a question-answering model over `dataset`'s windows and returns each question's
/// answer, in question order.
std::vector<Answer> answer_questions(models::Model& model, const data::QuestionAnsweringDataset& dataset,
                                     const AnswerOptions& options, int64_t batch_size, int32_t pad_id, c10::Device device);

}  // namespace lmkit::eval
