// lmkit-evaluate: measures a checkpoint on data: causal perplexity (per token, per
// word, bits per byte), masked-LM perplexity, pseudo-perplexity, span-corruption loss,
// BLEU of beam-search translations, zero/few-shot in-context scores, and the metric of
// every registered finetuning task (tasks/task.h: the task reads its data as the
// checkpoint's finetune.json records).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/stop.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/eval/generation.h"
#include "lmkit/eval/in_context.h"
#include "lmkit/eval/loss.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/eval/perplexity.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tasks/task.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  std::string checkpoint, data, metric, output, references, predictions;
  std::vector<std::string> data_files;  ///< --data, repeatable for the in-context metrics
  eval::IclOptions icl;
  data::ColumnSpec columns;
  int64_t context = 0, stride = 0, seq_len = 0, batch_size = 8, max_sequences = 0;
  int64_t max_examples = 0;  ///< --max-eval-examples: the first N examples (task metrics, in-context, bleu)
  int64_t beams = 4, max_new_tokens = 64;  ///< bleu (the flags are the generation metric's too)
  bool overwrite = false;
};

// lmkit-evaluate's own metrics; each finetuning task adds its own (tasks::TaskSpec::metric).
const std::vector<std::pair<std::string, std::string>>& own_metrics() {
  static const std::vector<std::pair<std::string, std::string>> metrics = {
      {"perplexity", "causal LM perplexity over a text (per token, per word, bits per byte)"},
      {"mlm-perplexity", "masked-LM perplexity"},
      {"pseudo-perplexity", "pseudo-perplexity (each token masked in turn)"},
      {"span", "span-corruption loss"},
      {"objective", "the family's pretraining objective on held-out text: each loss term and the figures the "
                    "model reports"},
      {"bleu", "BLEU of beam-search translations of source lines (--references)"},
      {"multiple-choice", "in-context multiple choice and schemas"},
      {"completion", "in-context completions"},
      {"in-context", "any in-context task file"}};
  return metrics;
}

std::vector<std::string> tasks_metrics() {
  std::vector<std::string> names;
  for (const auto& t : tasks::tasks()) names.push_back(t.metric);
  return names;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : own_metrics()) names.push_back(name);
  for (const auto& t : tasks::tasks()) names.push_back(t.metric);
  return names;
}

std::string metric_help() {
  std::string text;
  for (const auto& [name, what] : own_metrics()) text += (text.empty() ? "" : "; ") + name + ": " + what;
  for (const auto& t : tasks::tasks()) text += "; " + t.metric + ": a checkpoint finetuned with --task " + t.name;
  return text;
}

// The checkpoint's model, its vocabulary checked against the tokenizer evaluation uses.
std::shared_ptr<models::Model> load_model(const Args& a, const tokenizer::Tokenizer& tok, const std::string& architecture = "",
                                          bool companions_required = false) {
  auto model = models::load_pretrained(a.checkpoint, architecture, nullptr, Json::object(), false, companions_required);
  models::check_vocabulary(*model, tok.vocab_size(), a.checkpoint);
  return model;
}

// The stamp lmkit-evaluate puts in every result file. The file is its own to replace for
// the same evaluation (metric, checkpoint and data); another evaluation's result is kept
// (the default result.json of an earlier command), and a user's file needs --overwrite.
constexpr const char* kWrittenBy = "written_by";
constexpr const char* kStamp = "lmkit-evaluate";

Json data_of(const Args& a, bool icl) { return icl ? Json(a.data_files) : Json(a.data); }

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

Json bleu(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device) {
  check_input(!a.references.empty(), "--metric bleu needs --references FILE (one reference per source line)");
  auto sources = read_lines(a.data), refs = read_lines(a.references);
  check_input(sources.size() == refs.size(), a.data + " and " + a.references + " differ in line count");
  if (a.max_examples > 0 && sources.size() > static_cast<size_t>(a.max_examples)) {
    sources.resize(static_cast<size_t>(a.max_examples)), refs.resize(static_cast<size_t>(a.max_examples));
  }
  check_input(!sources.empty(), a.data + ": no source lines to translate");
  auto model = load_model(a, tok);
  model->to(device);
  eval::GenerationOptions g;
  g.search = eval::Search::kBeam, g.num_beams = a.beams, g.max_new_tokens = a.max_new_tokens;
  const auto hypotheses = eval::translate(*model, tok, sources, g, device);
  const auto b = eval::corpus_bleu(hypotheses, {refs});
  return {{"bleu", b.bleu}, {"precisions", b.precisions}, {"brevity_penalty", b.brevity_penalty},
          {"hypothesis_length", b.hypothesis_length}, {"reference_length", b.reference_length},
          {"sentences", hypotheses.size()}};
}

// A finetuning task's metric: the task reads the data as the checkpoint's finetune.json
// records, the flags given over it.
Json task_metric(const Args& a, const CLI::App& app, const tasks::TaskSpec& spec, tasks::Task& task,
                 const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  const auto& family = models::family(model->model_type());
  const std::string& head = family.head_or_error(spec.head);
  if (model->architecture() != head) {
    throw InputError(a.checkpoint + ": " + model->architecture() + " has no " + spec.head + " head (finetune it with --task " +
                     spec.name + " first)");
  }
  const Json info = tasks::read_info(a.checkpoint, spec.name);
  task.use_info(info, app);
  model->to(device);
  const int64_t length = app.count("--seq-len") ? a.seq_len : info.value("max_length", int64_t{0});
  const tasks::Context c{tok,    data::pad_id(tok),      device, a.batch_size, length, a.columns, family, model->config_json(),
                         a.checkpoint, /*leader=*/true, &app, a.max_examples};
  return task.evaluate(*model, c, a.data, a.predictions);
}

bool in_context_metric(const std::string& metric) {
  return metric == "multiple-choice" || metric == "completion" || metric == "in-context";
}

// The formats a metric name takes: multiple choice and schemas, completions, or any.
void check_icl_format(const Args& a, const eval::IclTask& task) {
  const bool completion = task.format == eval::IclFormat::kCompletion;
  check_input(a.metric == "in-context" || completion == (a.metric == "completion"),
              task.path + ": a " + (completion ? "completion" : "multiple-choice") + " task, not --metric " + a.metric +
                  " (use --metric " + (completion ? "completion" : "multiple-choice") + ", or in-context for any)");
}

// Zero- and few-shot scoring of a causal LM on one or more task files.
Json in_context(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device) {
  // The task files first: a malformed one is said before the model loads.
  std::vector<eval::IclTask> tasks;
  for (const auto& file : eval::icl_task_files(a.data_files)) {
    tasks.push_back(eval::read_icl_task(file));
    check_icl_format(a, tasks.back());
    auto& examples = tasks.back().examples;  // --max-eval-examples: demonstrations come from the kept ones
    if (a.max_examples > 0 && examples.size() > static_cast<size_t>(a.max_examples)) examples.resize(static_cast<size_t>(a.max_examples));
  }
  auto model = load_model(a, tok);
  const auto& family = models::family(model->model_type());
  if (family.encoder_decoder || model->architecture() != family.head(models::kTextToTextHead)) {
    std::vector<std::string> causal;  // the decoder-only families' generators
    for (const auto& f : models::families()) {
      if (!f.encoder_decoder && !f.head(models::kTextToTextHead).empty()) causal.push_back(f.head(models::kTextToTextHead));
    }
    throw InputError(a.checkpoint + ": --metric " + a.metric + " scores causal language models (" + join_names(causal, " or ") +
                     "), not " + model->architecture());
  }
  model->to(device);
  Json results = Json::array();
  std::string predictions;
  for (const auto& task : tasks) {
    std::vector<eval::IclScore> scores;
    results.push_back(eval::evaluate_in_context(*model, tok, task, a.icl, device, &scores));
    predictions += eval::icl_predictions_jsonl(task, scores);
  }
  if (!a.predictions.empty()) write_file_atomic(a.predictions, predictions);
  std::fputs(eval::icl_table(results).c_str(), stdout);
  Json r = results.size() == 1 ? results[0] : Json::object();
  r["tasks"] = results;
  r["seed"] = a.icl.seed, r["delimiter"] = a.icl.delimiter, r["example_delimiter"] = a.icl.example_delimiter;
  return r;
}

// The objective that trains the checkpoint's own architecture (a BertForSpanPreTraining
// checkpoint is scored on mlm+sbo, a BertForMaskedLM one on mlm), else the family's first.
const models::Objective& checkpoint_objective(const models::Family& family, const Json& config) {
  const std::string own = models::config_architecture(config);
  for (const auto& o : family.objectives) {
    if (o.architecture == own) return o;
  }
  return family.objective("");
}

// The checkpoint's pretraining objective, batched from the text as in training (seed 0),
// through the architecture it trains: every loss term and figure the model reports.
Json objective_metric(const Args& a, const tokenizer::Tokenizer& tok, const models::Family& family, const Json& config,
                      std::shared_ptr<const data::Corpus> corpus, c10::Device device) {
  check_input(!family.objectives.empty(), "--metric objective: model_type '" + family.model_type + "' has no pretraining objective");
  const models::Objective& objective = checkpoint_objective(family, config);
  const data::ObjectiveSpec& spec = data::objective(objective.name);
  check_input(!spec.parallel_text, "--metric objective: objective '" + spec.name + "' reads parallel text, not a corpus");
  data::check_objective_tokenizer(spec, tok);
  auto model = load_model(a, tok, objective.architecture, /*companions_required=*/true);  // the objective runs them
  model->to(device);
  data::ObjectiveInputs in;
  in.corpus = std::move(corpus), in.tokenizer = &tok, in.seq_len = a.seq_len > 0 ? a.seq_len : 128, in.seed = 0;
  data::LoaderOptions lo;
  lo.batch_size = a.batch_size, lo.pad_id = data::pad_id(tok), lo.prefetch = 1;
  Json r = eval::evaluate_loss(*model, spec.dataset(in), lo, device);
  r["objective"] = spec.name, r["architecture"] = objective.architecture;
  return r;
}

// Perplexity-like metrics over a text file or corpus: which apply is the family's to say.
Json corpus_metric(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device, const std::string& work) {
  const Json config = load_json_file(a.checkpoint + "/config.json");
  const auto& family = models::family_of_config(config, a.checkpoint + "/config.json");
  if (a.metric == "objective") {
    return objective_metric(a, tok, family, config, data::open_corpus(a.data, tok, work, "data"), device);
  }
  if (std::find(family.metrics.begin(), family.metrics.end(), a.metric) == family.metrics.end()) {
    throw InputError("--metric " + a.metric + " does not apply to a " + family.model_type + " checkpoint (" +
                     (family.metrics.empty() ? "it has no corpus metric" : "use " + join_names(family.metrics)) + ")");
  }
  auto corpus = data::open_corpus(a.data, tok, work, "data");
  const int64_t seq_len = a.seq_len > 0 ? a.seq_len : 128;
  if (a.metric == "perplexity") {
    auto model = load_model(a, tok);
    model->to(device);
    const int64_t positions = family.max_length(config);  // 0: the positions have no end (rotary)
    const int64_t meant = !family.context_key.empty() && config.contains(family.context_key) && config[family.context_key].is_number_integer()
                              ? config[family.context_key].get<int64_t>() : 0;
    // --seq-len N: non-overlapping windows of N tokens (Press et al.'s evaluation at a length).
    check_input(a.seq_len == 0 || a.context == 0 || a.context == a.seq_len,
                "--seq-len N is --context N --stride N for perplexity: --seq-len " + std::to_string(a.seq_len) +
                    " and --context " + std::to_string(a.context) + " disagree");
    const int64_t context = a.context > 0 ? a.context : a.seq_len;
    const std::string flag = a.context > 0 ? "--context" : "--seq-len";
    check_input(context > 0 || positions > 0 || meant > 0, a.checkpoint + ": give --context (the model's positions have no end)");
    eval::SlidingWindow w{context > 0 ? context : positions > 0 ? positions : meant, a.stride > 0 ? a.stride : a.seq_len,
                          a.batch_size};
    check_input(positions == 0 || w.context <= positions, flag + " " + std::to_string(w.context) + " exceeds the model's " +
                                                              std::to_string(positions) + " positions (" + family.positions_key + ")");
    eval::TextStats stats;
    const bool text = !data::is_corpus(a.data);
    if (text) stats = eval::text_stats(a.data);
    return eval::causal_perplexity(*model, *corpus, tok.specials().eos, w, device, text ? &stats : nullptr);
  }
  if (a.metric == "span") {
    auto model = load_model(a, tok);
    model->to(device);
    return eval::span_perplexity(*model, corpus, tok, seq_len, a.batch_size, device);
  }
  auto model = load_model(a, tok, family.objective("mlm").architecture);
  model->to(device);
  return a.metric == "mlm-perplexity" ? eval::masked_lm_perplexity(*model, corpus, tok, seq_len, a.batch_size, device)
                                      : eval::pseudo_perplexity(*model, corpus, tok, seq_len, a.max_sequences, device);
}

// What the metric reads must be there before the model is loaded (a task's reader names its files itself).
void check_inputs(const Args& a, bool icl, bool task) {
  check_input(a.data_files.size() == 1 || icl, "--data is repeatable for the in-context metrics only");
  check_input(a.predictions.empty() || icl || task,
              "--predictions applies to the in-context metrics and those of the finetuning tasks (" +
                  join_names(tasks_metrics()) + ")");
  if (!a.predictions.empty()) check_output_file(a.predictions, a.overwrite, "--predictions");
  check_input(a.max_examples == 0 || task || icl || a.metric == "bleu",
              "--max-eval-examples applies to the in-context metrics, bleu and those of the finetuning tasks, not --metric " +
                  a.metric + " (give a shorter --data file" + (a.metric == "pseudo-perplexity" ? ", or --max-sequences)" : ")"));
  if (!task && !icl) {
    check_input(fs::exists(a.data), a.data + ": no such file or corpus directory");
    if (!data::is_corpus(a.data)) check_readable_file(a.data);
  }
  check_result_file(a, icl);
  check_input(fs::is_directory(a.checkpoint), "--checkpoint " + a.checkpoint + ": no such checkpoint directory");
  check_input(tokenizer::Tokenizer::present(a.checkpoint),
              a.checkpoint + ": no tokenizer (evaluation needs the checkpoint's tokenizer)");
}

void run(const Args& a, const CLI::App& app, tasks::TaskFlags& task_flags) {
  const c10::Device device = init_runtime(a.runtime);
  const auto names = metric_names();
  check_input(std::find(names.begin(), names.end(), a.metric) != names.end(),
              "--metric '" + a.metric + "' is not one of " + join_names(names, " or "));
  const tasks::TaskSpec* spec = tasks::task_with_metric(a.metric);
  task_flags.check_given(app, spec ? spec->name : "", a.metric == "bleu" ? std::vector<std::string>{"--beams", "--max-new-tokens"}
                                                                          : std::vector<std::string>{});
  const bool icl = in_context_metric(a.metric);
  // One evaluation writes an --output at a time: a second is refused naming the first's process
  // (both used to finish, and one result was lost).
  const OutputLock lock(a.output.empty() ? "result.json" : a.output);
  check_inputs(a, icl, spec != nullptr);
  const auto tok = tokenizer::Tokenizer::load(a.checkpoint);
  TempDir work("lmkit-eval");  // a text file's corpus, removed at the end
  Json r = spec                 ? task_metric(a, app, *spec, task_flags.of(spec->name), tok, device)
           : a.metric == "bleu" ? bleu(a, tok, device)
           : icl                ? in_context(a, tok, device)
                                : corpus_metric(a, tok, device, work.path());
  r["metric"] = a.metric;
  r["checkpoint"] = a.checkpoint;
  r[kWrittenBy] = kStamp;
  r["data"] = data_of(a, icl);
  if (!icl) print_table(r);
  save_json_file(a.output.empty() ? "result.json" : a.output, r);
}

// The flags of the in-context metrics (multiple-choice, completion, in-context).
void add_in_context_flags(CLI::App& app, Args& a) {
  app.add_option("--shots", a.icl.shots, "in-context: demonstrations before each example, drawn from the same file")
      ->check(non_negative());
  app.add_option("--delimiter", a.icl.delimiter, "in-context: between context and continuation (default a space)");
  app.add_option("--example-delimiter", a.icl.example_delimiter,
                 "in-context: after each demonstration (default a newline)");
  app.add_flag("!--no-context-cache", a.icl.share_context,
               "in-context: read an example's context once per choice (lm-evaluation-harness' way), not once "
               "through the KV cache for all its choices");
}

// The checkpoint, the data and the result.
void add_io_flags(CLI::App& app, Args& a) {
  app.add_option("--checkpoint", a.checkpoint, "checkpoint directory (lmkit's or HuggingFace's, with its tokenizer)")->required();
  app.add_option("--data", a.data_files,
                 "text file, corpus directory, labelled file, source sentences (bleu); in-context: task files or "
                 "directories of them, repeatable")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--metric", a.metric, metric_help())->required();
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

// The corpus metrics' and every metric's batching.
void add_corpus_flags(CLI::App& app, Args& a) {
  app.add_option("--context", a.context, "perplexity: tokens per window (default: the model's maximum)")
      ->check(non_negative());
  app.add_option("--stride", a.stride, "perplexity: window step (default: = context)")->check(non_negative());
  app.add_option("--seq-len", a.seq_len,
                 "sequence length (mlm, pseudo, span; default 128), non-overlapping windows (perplexity: --context N "
                 "--stride N), or max length (a finetuning task's metric; default: the finetuning's --max-length)")
      ->check(in_range(8, 1 << 16));
  app.add_option("--batch-size", a.batch_size, "sequences per batch")->check(positive());
  app.add_option("--max-eval-examples", a.max_examples,
                 "evaluate the first N examples only: rows, sentences, pairs, source lines or in-context examples "
                 "(0: all)")
      ->check(non_negative());
  app.add_option("--max-sequences", a.max_sequences, "pseudo-perplexity: sequences scored (0: all)")
      ->check(non_negative());
  app.add_option("--references", a.references, "bleu: reference translations, one per line");
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and tasks appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-evaluate: perplexity, masked-LM perplexity, span loss, BLEU, in-context scores, or the metric of a "
               "finetuning task (" + tasks::task_names() + ") of a checkpoint");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Args a;
  add_io_flags(app, a);
  add_corpus_flags(app, a);
  tasks::TaskFlags task_flags;
  if (const int rc = guard([&] { task_flags = tasks::add_task_flags(app, tasks::Mode::kEvaluate); })) return rc;
  // bleu reads the generation metric's --beams and --max-new-tokens, with defaults of its own.
  app.get_option("--beams")->description(app.get_option("--beams")->get_description() + "; bleu: 4");
  app.get_option("--max-new-tokens")->description(app.get_option("--max-new-tokens")->get_description() + "; bleu: 64");
  add_in_context_flags(app, a);
  add_runtime_flags(app, a.runtime);
  return run_app(app, argc, argv, [&] {
    a.data = a.data_files.back();
    a.icl.batch_size = a.batch_size;
    a.icl.seed = app.count("--seed") ? a.runtime.seed : 1234;  // lm-evaluation-harness' few-shot seed
    if (app.count("--beams")) a.beams = app.get_option("--beams")->as<int64_t>();
    if (app.count("--max-new-tokens")) a.max_new_tokens = app.get_option("--max-new-tokens")->as<int64_t>();
    StopSignals signals;  // SIGTERM/SIGINT stop the evaluation between batches
    try {
      run(a, app, task_flags);
    } catch (const Interrupted& e) {
      throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": nothing written");
    }
  });
}
