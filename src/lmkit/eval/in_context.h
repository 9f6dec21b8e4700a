// In-context (zero- and few-shot) evaluation of causal language models, scored as
// lm-evaluation-harness scores them: the log-likelihood of each continuation's
// tokens given its context, the context encoded alone and the continuation's tokens
// those of the whole string after the context's (a trailing space of the context
// moves to the continuation); demonstrations drawn as its ContextSampler draws them
// (Python's random.Random(seed).sample, the example itself excluded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/models/model.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::eval {

/// Python's random.Random: MT19937 seeded by init_by_array with the seed's 32-bit
/// words, getrandbits, _randbelow (rejection sampling) and sample(), so that a seed
/// draws the indexes CPython draws.
class PythonRandom {
 public:
  explicit PythonRandom(uint64_t seed);
  uint32_t getrandbits(int k);  ///< 1 <= k <= 32
  uint64_t randbelow(uint64_t n);
  /// random.sample(range(n), k): k distinct indexes in Python's order.
  std::vector<size_t> sample(size_t n, size_t k);

 private:
  uint32_t next();
  uint32_t mt_[624];
  int index_ = 624;
};

/// The three llm-foundry ICL formats and LAMBADA's.
enum class IclFormat {
  kMultipleChoice,  ///< {"query", "choices", "gold"}
  kSchema,          ///< {"context_options", "continuation", "gold"}
  kCompletion,      ///< {"context", "continuation"}, or LAMBADA's {"text"} (the last word is the continuation)
};

/// One example: its contexts (one, or a schema's options) and continuations (a
/// multiple choice's choices, or one), and which pair is right.
struct IclExample {
  std::vector<std::string> contexts, continuations;
  int64_t gold = 0;
  int64_t line = 0;
  Json source;  ///< the line's JSON (two equal lines are one document to the sampler)
};

struct IclTask {
  std::string name, path;
  IclFormat format = IclFormat::kCompletion;
  std::vector<IclExample> examples;
};

/// Reads a task file; the format is the first line's. InputError naming file and
/// line for a line of another format, a missing or out-of-range gold, an empty choice
/// list or a non-string field.
IclTask read_icl_task(const std::string& path);

struct IclOptions {
  int64_t shots = 0;
  uint64_t seed = 1234;                  ///< lm-evaluation-harness' default few-shot seed
  std::string delimiter = " ";           ///< between context and continuation
  std::string example_delimiter = "\n";  ///< after each demonstration
  int64_t batch_size = 8;
  /// The choices of an example that share one context score it once, through the KV cache
  /// (false: every choice re-reads its context, as lm-evaluation-harness does).
  bool share_context = true;
};

/// Per example: each pair's log-likelihood, continuation token count and whether
/// greedy decoding reproduces every continuation token; the prediction.
struct IclScore {
  std::vector<double> loglikelihoods;
  std::vector<int64_t> tokens;
  std::vector<bool> greedy;
  int64_t prediction = 0, prediction_norm = 0;
};

/// Scores every example of `task` with the causal LM `model`; returns accuracy,
/// accuracy_norm (multiple choice: the log-likelihood over the choice's characters),
/// perplexity (completion: exp of minus the mean log-likelihood per example, and
/// token_perplexity per continuation token), examples, shots, truncated (contexts
/// that lost their first tokens to the model's positions), requests, seconds and
/// examples_per_second. `scores` receives each example's figures.
Json evaluate_in_context(models::Model& model, const tokenizer::Tokenizer& tokenizer, const IclTask& task,
                         const IclOptions& options, c10::Device device, std::vector<IclScore>* scores = nullptr);

/// The task files `paths` name: each file, and each directory's *.jsonl in name order.
/// InputError for a missing path or a directory without task files.
std::vector<std::string> icl_task_files(const std::vector<std::string>& paths);

/// The table lmkit-evaluate prints: a row per task result (task, format, shots, accuracy,
/// acc_norm, perplexity, examples, truncated, examples/s).
std::string icl_table(const Json& results);

/// The predictions file: one JSON line per example (task, index, line, loglikelihoods,
/// tokens, greedy, prediction, prediction_norm, gold).
std::string icl_predictions_jsonl(const IclTask& task, const std::vector<IclScore>& scores);

}  // namespace lmkit::eval
