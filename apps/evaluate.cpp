// lmkit-evaluate: measures a checkpoint on data with a metric of the metric registry
// (tasks/metric.h): lmkit's own — causal perplexity, masked-LM perplexity,
// pseudo-perplexity, span loss, the pretraining objective, BLEU, in-context scores —
// every finetuning task's, and those plugins register. This file is the flags; the checks
// every metric shares, the result file and its table are tasks/evaluation.h's.
#include <optional>

#include "lmkit/core/app.h"
#include "lmkit/core/file.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/stop.h"
#include "lmkit/tasks/evaluation.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"
#include "lmkit/tokenizer/tokenizer.h"

using namespace lmkit;
namespace {

struct Args {
  RuntimeOptions runtime;
  tasks::EvaluationRequest request;  ///< --metric, --checkpoint, --data, --output, --predictions, ...
  data::ColumnSpec columns;
  int64_t seq_len = 0, batch_size = 8;
};

void run(const Args& a, const CLI::App& app, tasks::TaskFlags& task_flags, const tasks::MetricFlags& metric_flags) {
  tasks::EvaluationRequest r = a.request;
  const bool images = tasks::reads_images(r.checkpoint);
  // --metric classification of an image classifier is the image task's (its labels are IDX files or PNG folders).
  if (r.metric == "classification" && images) r.metric = "image-classification";
  const c10::Device device = init_runtime(a.runtime);
  const tasks::MetricSpec m = tasks::metric(r.metric);
  task_flags.check_given(app, m.task, m.also_reads);
  metric_flags.check_given(app, m);
  // One evaluation writes an --output at a time: a second is refused naming the first's process
  // (both used to finish, and one result was lost).
  const OutputLock lock(r.result_path());
  tasks::check_request(r, m);  // refuses --predictions naming the --output file, before its lock below
  std::optional<OutputLock> predictions_lock;  // and of --predictions
  if (!r.predictions.empty()) predictions_lock.emplace(r.predictions, "--predictions");
  // A model that reads images has no tokenizer: its task's metric gets the empty one.
  const auto tok = images ? tokenizer::Tokenizer{} : tokenizer::Tokenizer::load(r.checkpoint);
  TempDir work("lmkit-eval");  // a text file's corpus, removed at the end
  const tasks::MetricInputs in{r.checkpoint, r.data,    tok,           device,      a.batch_size, a.seq_len,
                               r.max_examples, a.columns, r.predictions, work.path(), app,          &task_flags};
  const Json result = tasks::stamp_result(call_registered(m.source, "metric '" + m.name + "'", [&] { return m.run(in); }), r, m);
  if (!m.prints_itself) tasks::print_result(result);
  save_json_file(r.result_path(), result);
}

// The checkpoint, the data and the result.
void add_io_flags(CLI::App& app, Args& a) {
  app.add_option("--checkpoint", a.request.checkpoint, "checkpoint directory (lmkit's or HuggingFace's, with its tokenizer)")->required();
  app.add_option("--data", a.request.data,
                 "text (a file, a directory of shards or a quoted pattern), corpus directory, labelled file, source sentences (bleu); in-context: task files or "
                 "directories of them, repeatable")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--metric", a.request.metric, tasks::metric_help())->required();
  app.add_option("--output", a.request.output, "result JSON file (default result.json)");
  app.add_flag("--overwrite", a.request.overwrite, "replace --output (and --predictions) although lmkit-evaluate did not write it");
  app.add_option("--predictions", a.request.predictions,
                 "write the predictions here (a finetuning task's file, or the in-context scores as JSONL)");
  app.add_option("--text-column,--text-field", a.columns.text,
                 "classification: text column; token-classification: JSONL words field (default: as finetuned); a "
                 "corpus metric: the JSONL field or Parquet column of --data's texts (default: text)");
  app.add_option("--label-column", a.columns.label,
                 "classification: label column; token-classification: CoNLL tag column or JSONL tags field (default: "
                 "as finetuned)");
  app.add_option("--format", a.columns.format, "auto (by extension), tsv, csv, jsonl or conll (default: as finetuned)");
}

// Every metric's batching and length.
void add_batch_flags(CLI::App& app, Args& a) {
  app.add_option("--seq-len", a.seq_len,
                 "sequence length (mlm, pseudo, span; default 128), non-overlapping windows (perplexity: --context N "
                 "--stride N), or max length (a finetuning task's metric; default: the finetuning's --max-length)")
      ->check(in_range(8, 1 << 16));
  app.add_option("--batch-size", a.batch_size, "sequences per batch")->check(positive());
  app.add_option("--max-eval-examples", a.request.max_examples,
                 "evaluate the first N examples only: rows, sentences, pairs, source lines or in-context examples "
                 "(0: all)")
      ->check(non_negative());
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and tasks appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-evaluate: a checkpoint measured with a metric: perplexity, masked-LM perplexity, span loss, BLEU, "
               "in-context scores, the metric of a finetuning task (" + tasks::task_names() + "), or a plugin's");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Args a;
  add_io_flags(app, a);
  add_batch_flags(app, a);
  tasks::TaskFlags task_flags;
  tasks::MetricFlags metric_flags;
  if (const int rc = guard([&] {
        task_flags = tasks::add_task_flags(app, tasks::Mode::kEvaluate);
        metric_flags = tasks::add_metric_flags(app);
      })) {
    return rc;
  }
  // bleu reads the generation metric's --beams and --max-new-tokens, with defaults of its own.
  app.get_option("--beams")->description(app.get_option("--beams")->get_description() + "; bleu: 4");
  app.get_option("--max-new-tokens")->description(app.get_option("--max-new-tokens")->get_description() + "; bleu: 64");
  add_runtime_flags(app, a.runtime);
  return run_app(app, argc, argv, [&] {
    StopSignals signals;  // SIGTERM/SIGINT stop the evaluation between batches
    try {
      run(a, app, task_flags, metric_flags);
    } catch (const Interrupted& e) {
      throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": nothing written");
    }
  });
}
