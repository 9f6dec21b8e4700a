// lmkit-evaluate: measures a checkpoint on data with a metric of the metric registry
// (tasks/metric.h): lmkit's own — causal perplexity, masked-LM perplexity,
// pseudo-perplexity, span loss, the pretraining objective, BLEU, in-context scores —
// every finetuning task's, and those plugins register. This file is the flags, the
// checks every metric shares, and the result file and table.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/stop.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/data/corpus.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"
#include "lmkit/tokenizer/tokenizer.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  std::string checkpoint, data, metric, output, predictions;
  std::vector<std::string> data_files;  ///< --data, repeatable where the metric reads several
  data::ColumnSpec columns;
  int64_t seq_len = 0, batch_size = 8;
  int64_t max_examples = 0;  ///< --max-eval-examples: the first N examples
  bool overwrite = false;
};

// The stamp lmkit-evaluate puts in every result file. The file is its own to replace for
// the same evaluation (metric, checkpoint and data); another evaluation's result is kept
// (the default result.json of an earlier command), and a user's file needs --overwrite.
constexpr const char* kWrittenBy = "written_by";
constexpr const char* kStamp = "lmkit-evaluate";

Json data_of(const Args& a, bool many) { return many ? Json(a.data_files) : Json(a.data); }

// A path as one file or folder, however it is spelt (relative, absolute, with a trailing slash).
std::string same_spelling(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(path, ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// The paths of a result's "data" (a string or a list of them), spelt one way.
Json same_spelling(const Json& data) {
  if (data.is_string()) return same_spelling(data.get<std::string>());
  Json out = Json::array();
  if (data.is_array()) {
    for (const auto& d : data) out.push_back(d.is_string() ? Json(same_spelling(d.get<std::string>())) : d);
  }
  return out;
}

void check_result_file(const Args& a, bool icl) {
  const std::string path = a.output.empty() ? "result.json" : a.output;
  bool ours = false;
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && !a.overwrite) {
    Json j;
    try {
      j = Json::parse(read_file(path));
    } catch (const std::exception&) {
    }
    if (j.is_object() && j.value(kWrittenBy, "") == kStamp) {
      const std::string metric = j.value("metric", ""), checkpoint = j.value("checkpoint", "");
      const Json data = j.value("data", Json());
      ours = metric == a.metric && same_spelling(checkpoint) == same_spelling(a.checkpoint) &&
             same_spelling(data) == same_spelling(data_of(a, icl));
      check_input(ours, (a.output.empty() ? "the default --output " : "--output ") + path + " holds another evaluation (" +
                            metric + " of " + checkpoint + " on " + (data.is_string() ? data.get<std::string>() : data.dump()) +
                            "): give --output FILE for this one, or --overwrite");
    }
  }
  check_output_file(path, a.overwrite || ours);
  if (!a.predictions.empty()) {
    check_input(fs::weakly_canonical(a.predictions, ec) != fs::weakly_canonical(path, ec),
                "--predictions and --output name the same file (" + path + ")");
  }
}

// A figure as a person reads it: four decimals, integers as they are, text without
// quotes, a list comma-joined, null (a correlation over constant gold scores) as undefined.
std::string shown(const Json& v) {
  if (v.is_number_float()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", v.get<double>());
    return text;
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "undefined";
  if (!v.is_array()) return v.dump();
  std::string list;
  for (const auto& x : v) list += (list.empty() ? "" : ", ") + shown(x);
  return list;
}

// The result as an aligned table on stdout: a row per figure, and a nested object (the
// per-type scores) as a row per entry with its figures as columns. The JSON file has it all.
void print_table(const Json& r) {
  std::printf("%s of %s on %s\n", r["metric"].get<std::string>().c_str(), r["checkpoint"].get<std::string>().c_str(),
              shown(r["data"]).c_str());
  size_t width = 0;
  for (auto it = r.begin(); it != r.end(); ++it) width = std::max(width, it.key().size());
  std::vector<std::string> nested;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& key = it.key();
    if (key == "metric" || key == "checkpoint" || key == "data" || key == kWrittenBy) continue;
    if (it.value().is_object()) nested.push_back(key);
    else std::printf("  %-*s  %s\n", static_cast<int>(width), key.c_str(), shown(it.value()).c_str());
  }
  for (const auto& key : nested) {
    const Json& rows = r[key];
    if (rows.empty() || !rows.begin().value().is_object()) {
      std::printf("  %-*s  %s\n", static_cast<int>(width), key.c_str(), rows.dump().c_str());
      continue;
    }
    std::printf("  %-*s", static_cast<int>(width), key.c_str());
    for (auto c = rows.begin().value().begin(); c != rows.begin().value().end(); ++c) std::printf("  %10s", c.key().c_str());
    std::printf("\n");
    for (auto row = rows.begin(); row != rows.end(); ++row) {
      std::printf("    %-*s", static_cast<int>(width) - 2, row.key().c_str());
      for (auto c = row.value().begin(); c != row.value().end(); ++c) std::printf("  %10s", shown(c.value()).c_str());
      std::printf("\n");
    }
  }
}

// What the metric reads must be there before the model is loaded (a metric that reads
// files of its own names them itself).
void check_inputs(const Args& a, const tasks::MetricSpec& m) {
  check_input(a.data_files.size() == 1 || m.many_data, "--data is repeatable for the in-context metrics only");
  std::vector<std::string> with_predictions, with_max;
  for (const auto& x : tasks::metrics()) {
    if (x.predictions) with_predictions.push_back(x.name);
    if (x.max_examples) with_max.push_back(x.name);
  }
  check_input(a.predictions.empty() || m.predictions,
              "--predictions applies to --metric " + join_names(with_predictions, ", ") + ", not " + m.name);
  if (!a.predictions.empty()) check_output_file(a.predictions, a.overwrite, "--predictions");
  check_input(a.max_examples == 0 || m.max_examples,
              "--max-eval-examples applies to --metric " + join_names(with_max, ", ") + ", not " + a.metric +
                  " (give a shorter --data file" + (a.metric == "pseudo-perplexity" ? ", or --max-sequences)" : ")"));
  if (m.corpus_data) {
    check_input(fs::exists(a.data), a.data + ": no such file or corpus directory");
    if (!data::is_corpus(a.data)) check_readable_file(a.data);
  }
  check_result_file(a, m.many_data);
  check_input(fs::is_directory(a.checkpoint), "--checkpoint " + a.checkpoint + ": no such checkpoint directory");
  check_input(tokenizer::Tokenizer::present(a.checkpoint),
              a.checkpoint + ": no tokenizer (evaluation needs the checkpoint's tokenizer)");
}

// Where the metric applies, said before the model loads.
void check_applies(const Args& a, const tasks::MetricSpec& m) {
  if (!m.refuses) return;
  const std::string file = a.checkpoint + "/config.json";
  const Json config = load_json_file(file);
  const models::Family& family = models::family_of_config(config, file);
  const std::string why = call_registered(m.source, "metric '" + m.name + "': refuses", [&] { return m.refuses(family, config); });
  check_input(why.empty(), why);
}

void run(const Args& a, const CLI::App& app, tasks::TaskFlags& task_flags, const tasks::MetricFlags& metric_flags) {
  const c10::Device device = init_runtime(a.runtime);
  const tasks::MetricSpec m = tasks::metric(a.metric);
  task_flags.check_given(app, m.task, m.also_reads);
  metric_flags.check_given(app, m);
  // One evaluation writes an --output at a time: a second is refused naming the first's process
  // (both used to finish, and one result was lost).
  const OutputLock lock(a.output.empty() ? "result.json" : a.output);
  check_inputs(a, m);
  const auto tok = tokenizer::Tokenizer::load(a.checkpoint);
  check_applies(a, m);
  TempDir work("lmkit-eval");  // a text file's corpus, removed at the end
  const tasks::MetricInputs in{a.checkpoint, a.data_files, tok,       device,        a.batch_size, a.seq_len,
                               a.max_examples, a.columns,   a.predictions, work.path(), app,          &task_flags};
  Json r = call_registered(m.source, "metric '" + m.name + "'", [&] { return m.run(in); });
  r["metric"] = a.metric;
  r["checkpoint"] = a.checkpoint;
  r[kWrittenBy] = kStamp;
  r["data"] = data_of(a, m.many_data);
  if (!m.prints_itself) print_table(r);
  save_json_file(a.output.empty() ? "result.json" : a.output, r);
}

// The checkpoint, the data and the result.
void add_io_flags(CLI::App& app, Args& a) {
  app.add_option("--checkpoint", a.checkpoint, "checkpoint directory (lmkit's or HuggingFace's, with its tokenizer)")->required();
  app.add_option("--data", a.data_files,
                 "text file, corpus directory, labelled file, source sentences (bleu); in-context: task files or "
                 "directories of them, repeatable")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--metric", a.metric, tasks::metric_help())->required();
  app.add_option("--output", a.output, "result JSON file (default result.json)");
  app.add_flag("--overwrite", a.overwrite, "replace --output (and --predictions) although lmkit-evaluate did not write it");
  app.add_option("--predictions", a.predictions,
                 "write the predictions here (a finetuning task's file, or the in-context scores as JSONL)");
  app.add_option("--text-column", a.columns.text, "classification: text column; token-classification: JSONL words field "
                 "(default: as finetuned)");
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
  app.add_option("--max-eval-examples", a.max_examples,
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
    a.data = a.data_files.back();
    StopSignals signals;  // SIGTERM/SIGINT stop the evaluation between batches
    try {
      run(a, app, task_flags, metric_flags);
    } catch (const Interrupted& e) {
      throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": nothing written");
    }
  });
}
