// lmkit-evaluate's own metrics as registry entries (metric.h): causal perplexity, masked-LM
// perplexity, pseudo-perplexity, span-corruption loss, the pretraining objective, BLEU of
// beam-search translations, and zero/few-shot in-context scoring; and the runner of a
// finetuning task's metric.
#include <cstdio>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/text.h"
#include "lmkit/data/text_input.h"
#include "lmkit/eval/fill_mask.h"
#include "lmkit/eval/generation.h"
#include "lmkit/eval/in_context.h"
#include "lmkit/eval/loss.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/eval/perplexity.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tasks/builtin.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tasks {

namespace {

const std::string& data_file(const MetricInputs& in) { return in.data.back(); }

// A corpus metric applies where the family lists it (Family::metrics).
std::function<std::string(const models::Family&, const Json&)> listed_by_family(const std::string& metric) {
  return [metric](const models::Family& family, const Json&) -> std::string {
    if (std::find(family.metrics.begin(), family.metrics.end(), metric) != family.metrics.end()) return "";
    return "--metric " + metric + " does not apply to a " + family.model_type + " checkpoint (" +
           (family.metrics.empty() ? "it has no corpus metric" : "use " + join_names(family.metrics)) + ")";
  };
}

MetricSpec corpus_metric(const std::string& name, const std::string& summary) {
  MetricSpec m;
  m.name = name;
  m.summary = summary;
  m.corpus_data = true;
  m.refuses = listed_by_family(name);
  return m;
}

// The JSONL field or Parquet column of a text --data's texts: --text-column (--text-field) where given,
// and one some file has (never a flag ignored).
std::string text_field_of(const MetricInputs& in) {
  if (!in.app.count("--text-column")) return "text";
  const std::string& data = data_file(in);
  data::check_text_field_used(data::is_corpus(data) ? std::vector<std::string>{} : data::text_files(data), in.columns.text,
                              "--text-field");
  return in.columns.text;
}

std::shared_ptr<const data::Corpus> corpus_of(const MetricInputs& in) {
  return data::open_corpus(data_file(in), in.tokenizer, in.work, "data", text_field_of(in));
}

// Sliding-window causal perplexity; --seq-len N is non-overlapping windows of N tokens (Press et al.).
Json perplexity(const MetricInputs& in) {
  const Json config = load_json_file(in.checkpoint + "/config.json");
  const auto& family = models::family_of_config(config, in.checkpoint + "/config.json");
  const int64_t context_flag = in.flag<int64_t>("--context", 0), stride = in.flag<int64_t>("--stride", 0);
  auto corpus = corpus_of(in);
  auto model = in.load();
  model->to(in.device);
  const int64_t positions = family.max_length(config);  // 0: the positions have no end (rotary)
  const int64_t meant = !family.context_key.empty() && config.contains(family.context_key) &&
                                config[family.context_key].is_number_integer()
                            ? config[family.context_key].get<int64_t>() : 0;
  check_input(in.seq_len == 0 || context_flag == 0 || context_flag == in.seq_len,
              "--seq-len N is --context N --stride N for perplexity: --seq-len " + std::to_string(in.seq_len) +
                  " and --context " + std::to_string(context_flag) + " disagree");
  const int64_t context = context_flag > 0 ? context_flag : in.seq_len;
  const std::string flag = context_flag > 0 ? "--context" : "--seq-len";
  check_input(context > 0 || positions > 0 || meant > 0, in.checkpoint + ": give --context (the model's positions have no end)");
  eval::SlidingWindow w{context > 0 ? context : positions > 0 ? positions : meant, stride > 0 ? stride : in.seq_len,
                        in.batch_size, in.flag<bool>("--per-document", false)};
  check_input(positions == 0 || w.context <= positions, flag + " " + std::to_string(w.context) + " exceeds the model's " +
                                                            std::to_string(positions) + " positions (" + family.positions_key + ")");
  eval::TextStats stats;
  const bool text = !data::is_corpus(data_file(in));
  if (text) stats = eval::text_stats(data_file(in), text_field_of(in));
  return eval::causal_perplexity(*model, *corpus, in.tokenizer.specials().eos, w, in.device, text ? &stats : nullptr);
}

int64_t seq_len_or_default(const MetricInputs& in) { return in.seq_len > 0 ? in.seq_len : 128; }

// The family's masked-LM head, for the masked-LM metrics of any BERT-like checkpoint.
std::shared_ptr<models::Model> masked_lm(const MetricInputs& in) {
  const Json config = load_json_file(in.checkpoint + "/config.json");
  auto model = in.load(models::family_of_config(config, in.checkpoint + "/config.json").objective("mlm").architecture);
  model->to(in.device);
  return model;
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
Json objective(const MetricInputs& in) {
  const Json config = load_json_file(in.checkpoint + "/config.json");
  const auto& family = models::family_of_config(config, in.checkpoint + "/config.json");
  const models::Objective& objective = checkpoint_objective(family, config);
  const data::ObjectiveSpec& spec = data::objective(objective.name);
  check_input(!spec.parallel_text, "--metric objective: objective '" + spec.name + "' reads parallel text, not a corpus");
  data::check_objective_tokenizer(spec, in.tokenizer);
  auto corpus = corpus_of(in);
  auto model = in.load(objective.architecture, /*companions_required=*/true);  // the objective runs them
  model->to(in.device);
  data::ObjectiveInputs oi;
  oi.corpus = std::move(corpus);
  oi.tokenizer = &in.tokenizer;
  oi.seq_len = seq_len_or_default(in);
  oi.seed = 0;
  data::LoaderOptions lo;
  lo.batch_size = in.batch_size;
  lo.pad_id = data::pad_id(in.tokenizer);
  lo.prefetch = 1;
  Json r = eval::evaluate_loss(*model, spec.dataset(oi), lo, in.device);
  r["objective"] = spec.name, r["architecture"] = objective.architecture;
  return r;
}

Json bleu(const MetricInputs& in) {
  const std::string references = in.flag<std::string>("--references", "");
  check_input(!references.empty(), "--metric bleu needs --references FILE (one reference per source line)");
  // gzip or zstd decompressed (their bytes were read as text); a binary file refused by name.
  auto sources = data::read_text_lines(data_file(in)), refs = data::read_text_lines(references);
  check_input(sources.size() == refs.size(), data_file(in) + " and " + references + " differ in line count");
  if (in.max_examples > 0 && sources.size() > static_cast<size_t>(in.max_examples)) {
    sources.resize(static_cast<size_t>(in.max_examples)), refs.resize(static_cast<size_t>(in.max_examples));
  }
  check_input(!sources.empty(), data_file(in) + ": no source lines to translate");
  auto model = in.load();
  model->to(in.device);
  eval::GenerationOptions g;
  g.search = eval::Search::kBeam;
  g.num_beams = in.flag<int64_t>("--beams", 4);
  g.max_new_tokens = in.flag<int64_t>("--max-new-tokens", 64);
  const auto hypotheses = eval::translate(*model, in.tokenizer, sources, g, in.device);
  const auto b = eval::corpus_bleu(hypotheses, {refs});
  return {{"bleu", b.bleu}, {"precisions", b.precisions}, {"brevity_penalty", b.brevity_penalty},
          {"hypothesis_length", b.hypothesis_length}, {"reference_length", b.reference_length},
          {"sentences", hypotheses.size()}};
}

const std::vector<std::string>& icl_flags() {
  static const std::vector<std::string> flags = {"--shots", "--delimiter", "--example-delimiter", "--no-context-cache"};
  return flags;
}

// The flags of the in-context metrics (multiple-choice adds them; completion and in-context read them).
void add_icl_flags(CLI::App& app) {
  app.add_option("--shots", "in-context: demonstrations before each example, drawn from the same file")
      ->type_name("INT")
      ->check(non_negative())
      ->default_str("0");
  app.add_option("--delimiter", "in-context: between context and continuation (default a space)")->type_name("TEXT");
  app.add_option("--example-delimiter", "in-context: after each demonstration (default a newline)")->type_name("TEXT");
  app.add_flag("--no-context-cache", "in-context: read an example's context once per choice (lm-evaluation-harness' way), "
                                     "not once through the KV cache for all its choices");
}

eval::IclOptions icl_options(const MetricInputs& in) {
  eval::IclOptions o;
  o.shots = in.flag<int64_t>("--shots", 0);
  o.delimiter = in.flag<std::string>("--delimiter", o.delimiter);
  o.example_delimiter = in.flag<std::string>("--example-delimiter", o.example_delimiter);
  o.share_context = in.app.count("--no-context-cache") == 0;
  o.batch_size = in.batch_size;
  o.seed = in.flag<uint64_t>("--seed", 1234);  // lm-evaluation-harness' few-shot seed
  return o;
}

// The formats a metric name takes: multiple choice and schemas, completions, or any.
void check_icl_format(const std::string& metric, const eval::IclTask& task) {
  const bool completion = task.format == eval::IclFormat::kCompletion;
  check_input(metric == "in-context" || completion == (metric == "completion"),
              task.path + ": a " + (completion ? "completion" : "multiple-choice") + " task, not --metric " + metric +
                  " (use --metric " + (completion ? "completion" : "multiple-choice") + ", or in-context for any)");
}

// Only the decoder-only families' generators are scored in context.
void check_causal_lm(const MetricInputs& in, const std::string& metric, const models::Model& model) {
  const auto& family = models::family(model.model_type());
  if (!family.encoder_decoder && model.architecture() == family.head(models::kTextToTextHead)) return;
  std::vector<std::string> causal;
  for (const auto& f : models::families()) {
    if (!f.encoder_decoder && !f.head(models::kTextToTextHead).empty()) causal.push_back(f.head(models::kTextToTextHead));
  }
  throw InputError(in.checkpoint + ": --metric " + metric + " scores causal language models (" + join_names(causal, " or ") +
                   "), not " + model.architecture());
}

// Zero- and few-shot scoring of a causal LM on one or more task files.
Json in_context(const MetricInputs& in, const std::string& metric) {
  // The task files first: a malformed one is said before the model loads.
  std::vector<eval::IclTask> tasks;
  for (const auto& file : eval::icl_task_files(in.data)) {
    tasks.push_back(eval::read_icl_task(file));
    check_icl_format(metric, tasks.back());
    auto& examples = tasks.back().examples;  // --max-eval-examples: demonstrations come from the kept ones
    if (in.max_examples > 0 && examples.size() > static_cast<size_t>(in.max_examples)) examples.resize(static_cast<size_t>(in.max_examples));
  }
  auto model = in.load();
  check_causal_lm(in, metric, *model);
  model->to(in.device);
  const eval::IclOptions o = icl_options(in);
  Json results = Json::array();
  std::string predictions;
  for (const auto& task : tasks) {
    std::vector<eval::IclScore> scores;
    results.push_back(eval::evaluate_in_context(*model, in.tokenizer, task, o, in.device, &scores));
    predictions += eval::icl_predictions_jsonl(task, scores);
  }
  if (!in.predictions.empty()) write_file_atomic(in.predictions, predictions);
  std::fputs(eval::icl_table(results).c_str(), stdout);
  Json r = results.size() == 1 ? results[0] : Json::object();
  r["tasks"] = results;
  r["seed"] = o.seed, r["delimiter"] = o.delimiter, r["example_delimiter"] = o.example_delimiter;
  return r;
}

MetricSpec in_context_metric(const std::string& name, const std::string& summary) {
  MetricSpec m;
  m.name = name;
  m.summary = summary;
  m.many_data = true;
  m.predictions = true;
  m.max_examples = true;
  m.prints_itself = true;
  m.also_reads = icl_flags();
  m.run = [name](const MetricInputs& in) { return in_context(in, name); };
  return m;
}

MetricSpec perplexity_metric() {
  MetricSpec ppl = corpus_metric("perplexity", "causal LM perplexity over a text (per token, per word, bits per byte)");
  ppl.add_flags = [](CLI::App& app) {
    app.add_option("--context", "perplexity: tokens per window (default: the model's maximum)")
        ->type_name("INT")
        ->check(non_negative());
    app.add_option("--stride", "perplexity: window step (default: = context)")->type_name("INT")->check(non_negative());
    app.add_flag("--per-document", "perplexity: score each document alone (no window crosses a document's end; "
                                   "its first token unscored), as a model trained with --document-mask is asked");
  };
  ppl.run = perplexity;
  return ppl;
}

}  // namespace

std::vector<MetricSpec> builtin_metrics() {
  MetricSpec ppl = perplexity_metric();
  MetricSpec mlm = corpus_metric("mlm-perplexity", "masked-LM perplexity");
  mlm.run = [](const MetricInputs& in) {
    auto corpus = corpus_of(in);
    return eval::masked_lm_perplexity(*masked_lm(in), corpus, in.tokenizer, seq_len_or_default(in), in.batch_size, in.device);
  };
  MetricSpec pseudo = corpus_metric("pseudo-perplexity", "pseudo-perplexity (each token masked in turn)");
  pseudo.add_flags = [](CLI::App& app) {
    app.add_option("--max-sequences", "pseudo-perplexity: sequences scored (0: all)")->type_name("INT")->check(non_negative());
  };
  pseudo.run = [](const MetricInputs& in) {
    auto corpus = corpus_of(in);
    return eval::pseudo_perplexity(*masked_lm(in), corpus, in.tokenizer, seq_len_or_default(in),
                                   in.flag<int64_t>("--max-sequences", 0), in.device);
  };
  MetricSpec span = corpus_metric("span", "span-corruption loss");
  span.run = [](const MetricInputs& in) {
    auto corpus = corpus_of(in);
    auto model = in.load();
    model->to(in.device);
    return eval::span_perplexity(*model, corpus, in.tokenizer, seq_len_or_default(in), in.batch_size, in.device);
  };
  MetricSpec obj = corpus_metric("objective", "the family's pretraining objective on held-out text: each loss term and the "
                                              "figures the model reports");
  obj.refuses = [](const models::Family& family, const Json&) -> std::string {
    return family.objectives.empty() ? "--metric objective: model_type '" + family.model_type + "' has no pretraining objective" : "";
  };
  obj.run = objective;
  MetricSpec b;
  b.name = "bleu";
  b.summary = "BLEU of beam-search translations of source lines (--references)";
  b.corpus_data = true;
  b.max_examples = true;
  b.add_flags = [](CLI::App& app) { app.add_option("--references", "bleu: reference translations, one per line")->type_name("FILE"); };
  b.also_reads = {"--beams", "--max-new-tokens"};  // the generation task's, with defaults of its own
  b.run = bleu;
  MetricSpec mc = in_context_metric("multiple-choice", "in-context multiple choice and schemas");
  mc.add_flags = add_icl_flags;
  MetricSpec cloze;
  cloze.name = "cloze";
  cloze.summary = "LAMA-style cloze probes of a masked LM (--data: template<TAB>answer): precision@1, @10 and MRR";
  cloze.refuses = [](const models::Family& family, const Json&) -> std::string {
    for (const auto& o : family.objectives) {
      if (o.name == "mlm") return "";
    }
    return "--metric cloze probes a masked LM: model_type '" + family.model_type + "' has none";
  };
  cloze.run = [](const MetricInputs& in) { return eval::cloze_scores(*masked_lm(in), in.tokenizer, data_file(in), in.device); };
  return {ppl, mlm, pseudo, span, obj, b, mc, cloze, in_context_metric("completion", "in-context completions"),
          in_context_metric("in-context", "any in-context task file")};
}

Json run_task_metric(const MetricInputs& in, const std::string& name) {
  const TaskSpec& spec = task(name);
  auto model = in.load();
  const auto& family = models::family(model->model_type());
  const std::string& head = family.head_or_error(spec.head);
  if (model->architecture() != head) {
    throw InputError(in.checkpoint + ": " + model->architecture() + " has no " + spec.head + " head (finetune it with --task " +
                     spec.name + " first)");
  }
  Task& t = in.tasks->of(spec.name);
  const Json info = read_info(in.checkpoint, spec.name);
  t.use_info(info, in.app);
  model->to(in.device);
  const int64_t length = in.seq_len > 0 ? in.seq_len : info.value("max_length", int64_t{0});
  const Context c{in.tokenizer, data::pad_id(in.tokenizer), in.device,    in.batch_size, length, in.columns, family,
                  model->config_json(), in.checkpoint, /*leader=*/true, &in.app, in.max_examples};
  return t.evaluate(*model, c, data_file(in), in.predictions);
}

}  // namespace lmkit::tasks
