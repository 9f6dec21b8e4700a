// lmkit-evaluate: measures a checkpoint on data — causal perplexity (per token,
// per word, bits per byte), masked-LM perplexity, pseudo-perplexity, T5 span
// loss, classification metrics, token classification (seqeval's entity F1), and
// BLEU of beam-search translations.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/data/token_tasks.h"
#include "lmkit/eval/classification.h"
#include "lmkit/eval/generation.h"
#include "lmkit/eval/in_context.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/eval/text_to_text.h"
#include "lmkit/eval/perplexity.h"
#include "lmkit/eval/token_classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "text_pair_flags.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  std::string checkpoint, data, metric, output, references, predictions;
  std::vector<std::string> data_files;  ///< --data, repeatable for the in-context metrics
  eval::IclOptions icl;
  data::ColumnSpec columns;
  data::PairSpec pairs;        ///< generation: where sources and targets are
  data::Seq2SeqOptions s2s;    ///< generation: prefix, separator, lengths
  int64_t context = 0, stride = 0, seq_len = 0, batch_size = 8, max_sequences = 0, beams = 4, max_new_tokens = 64;
  bool overwrite = false, rouge_stemmer = false;
};

// The checkpoint's model, its vocabulary checked against the tokenizer evaluation uses.
std::shared_ptr<models::Model> load_model(const Args& a, const tokenizer::Tokenizer& tok, const std::string& architecture = "") {
  auto model = models::load_pretrained(a.checkpoint, architecture);
  models::check_vocabulary(*model, tok.vocab_size(), a.checkpoint);
  return model;
}

// The result file is replaced when an earlier lmkit-evaluate wrote it (a JSON object
// with "metric" and "checkpoint"), or with --overwrite; never a file of the user's.
void check_result_file(const Args& a) {
  const std::string path = a.output.empty() ? "result.json" : a.output;
  bool ours = false;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    try {
      const Json j = Json::parse(read_file(path));
      ours = j.is_object() && j.contains("metric") && j.contains("checkpoint");
    } catch (const std::exception&) {
    }
  }
  check_output_file(path, a.overwrite || ours);
}

void print_table(const Json& r) {
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it.value().is_number_float()) std::printf("%-18s %.4f\n", it.key().c_str(), it.value().get<double>());
    else std::printf("%-18s %s\n", it.key().c_str(), it.value().dump().c_str());
  }
}

Json classification(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  const Json config = model->config_json();
  const auto& family = models::family(model->model_type());
  if (model->architecture() != family.classifier) {
    throw InputError(a.checkpoint + ": " + model->architecture() + " has no classification head (finetune it first)");
  }
  const int64_t num_labels = static_cast<int64_t>(config.value("id2label", Json::object()).size());
  const auto label_map = data::load_label_map(a.checkpoint, num_labels);
  data::ColumnSpec cols = a.columns;
  cols.regression = num_labels == 1;
  // The length the classifier was finetuned with unless --seq-len says otherwise.
  const int64_t trained = data::finetuned_max_length(a.checkpoint);
  int64_t length = a.seq_len > 0 ? a.seq_len : trained > 0 ? trained : 128;
  if (family.max_length(config) > 0) length = std::min(length, family.max_length(config));
  model->to(device);
  auto ds = std::make_shared<data::ClassificationDataset>(a.data, cols, tok, length, label_map);
  Json r = eval::evaluate_classifier(*model, ds, a.batch_size, data::pad_id(tok), device);
  r["max_length"] = length;
  return r;
}

// A finetuned checkpoint's finetune.json; {} for others (HF's, pretrained ones).
Json finetune_info(const std::string& dir) {
  const std::string file = dir + "/finetune.json";
  return fs::exists(file) ? load_json_file(file) : Json::object();
}

// How the token classifier read its data (finetune.json), --text-column / --label-column over it.
data::TaggedFormat tagged_format(const Args& a, const CLI::App& app, bool& label_all_subwords) {
  data::TaggedFormat f;
  const Json j = finetune_info(a.checkpoint);
  f.tag_column = j.value("tag_column", f.tag_column);
  f.tokens_field = j.value("tokens_field", f.tokens_field), f.tags_field = j.value("tags_field", f.tags_field);
  label_all_subwords = j.value("label_all_subwords", false);
  if (app.count("--text-column")) f.tokens_field = a.columns.text;
  if (app.count("--label-column")) data::set_tag_source(f, a.columns.label);
  return f;
}

Json token_classification(const Args& a, const CLI::App& app, const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  const Json config = model->config_json();
  const auto& family = models::family(model->model_type());
  if (model->architecture() != family.token_classifier) {
    throw InputError(a.checkpoint + ": " + model->architecture() +
                     " has no token-classification head (finetune it with --task token-classification first)");
  }
  const int64_t num_labels = static_cast<int64_t>(config.value("id2label", Json::object()).size());
  const auto tag_map = data::load_label_map(a.checkpoint, num_labels);
  bool label_all = false;
  const data::TaggedFormat format = tagged_format(a, app, label_all);
  const int64_t trained = data::finetuned_max_length(a.checkpoint);
  int64_t length = a.seq_len > 0 ? a.seq_len : trained > 0 ? trained : 128;
  if (family.max_length(config) > 0) length = std::min(length, family.max_length(config));
  model->to(device);
  const data::TokenClassificationDataset ds(data::read_tagged_sentences(a.data, format), a.data, tok, tag_map, {length, label_all});
  std::vector<std::vector<std::string>> predicted;
  Json r = eval::evaluate_token_classifier(*model, ds, tag_map, a.batch_size, data::pad_id(tok), device, &predicted);
  if (!a.predictions.empty()) write_file_atomic(a.predictions, eval::predictions_conll(ds.sentences(), predicted));
  r["max_length"] = length;
  return r;
}

Json bleu(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  check_input(!a.references.empty(), "--metric bleu needs --references FILE (one reference per source line)");
  const auto sources = read_lines(a.data), refs = read_lines(a.references);
  check_input(sources.size() == refs.size(), a.data + " and " + a.references + " differ in line count");
  model->to(device);
  eval::GenerationOptions g;
  g.search = eval::Search::kBeam, g.num_beams = a.beams, g.max_new_tokens = a.max_new_tokens;
  const auto hypotheses = eval::translate(*model, tok, sources, g, device);
  const auto b = eval::corpus_bleu(hypotheses, {refs});
  return {{"bleu", b.bleu}, {"precisions", b.precisions}, {"brevity_penalty", b.brevity_penalty},
          {"hypothesis_length", b.hypothesis_length}, {"reference_length", b.reference_length},
          {"sentences", hypotheses.size()}};
}

// How the text-to-text model read its data (finetune.json), the flags given over it.
void seq2seq_format(Args& a, const CLI::App& app, const models::Family& family, eval::GenerationOptions& g) {
  const Json j = finetune_info(a.checkpoint);
  auto pick = [&](const char* flag, const char* key, auto& value) {
    if (!app.count(flag)) value = j.value(key, value);
  };
  pick("--source-column", "source_column", a.pairs.source), pick("--target-column", "target_column", a.pairs.target);
  pick("--source-lang", "source_lang", a.pairs.source_lang), pick("--target-lang", "target_lang", a.pairs.target_lang);
  pick("--source-prefix", "source_prefix", a.s2s.source_prefix), pick("--separator", "separator", a.s2s.separator);
  pick("--max-target-length", "max_target_length", a.s2s.max_target_length);
  pick("--rouge-stemmer", "rouge_stemmer", a.rouge_stemmer);
  a.s2s.max_source_length = app.count("--seq-len") ? a.seq_len : j.value("max_length", a.s2s.max_source_length);
  if (!app.count("--beams")) a.beams = j.value("beams", int64_t{1});
  if (!app.count("--max-new-tokens")) a.max_new_tokens = j.value("max_new_tokens", int64_t{0});
  a.s2s.decoder_only = !family.encoder_decoder;
  a.pairs.format = a.columns.format;
  g = eval::text_generation_options(a.beams, a.max_new_tokens, a.s2s.max_target_length);
}

Json generation(Args a, const CLI::App& app, const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  const auto& family = models::family(model->model_type());
  if (model->architecture() != family.text_to_text) {
    throw InputError(a.checkpoint + ": " + model->architecture() + " does not generate text (" +
                     family.text_to_text_or_error() + " does)");
  }
  eval::GenerationOptions g;
  seq2seq_format(a, app, family, g);
  model->to(device);
  const data::Seq2SeqDataset ds(data::read_text_pairs(a.data, a.pairs), a.data, tok, a.s2s);
  std::vector<std::string> texts;
  Json r = eval::evaluate_text_to_text(*model, tok, ds, g, a.batch_size, data::pad_id(tok), device, &texts, a.rouge_stemmer);
  if (!a.predictions.empty()) write_file_atomic(a.predictions, eval::predictions_lines(texts));
  r["beams"] = a.beams, r["max_new_tokens"] = g.max_new_tokens;
  return r;
}

bool in_context_metric(const std::string& metric) {
  return metric == "multiple-choice" || metric == "completion" || metric == "in-context";
}

// The task files: each --data, a directory's *.jsonl in name order.
std::vector<std::string> icl_files(const Args& a) {
  std::vector<std::string> files;
  for (const auto& d : a.data_files) {
    check_input(fs::exists(d), d + ": no such file or directory");
    if (!fs::is_directory(d)) {
      files.push_back(d);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() == ".jsonl") found.push_back(e.path().string());
    }
    check_input(!found.empty(), d + ": no .jsonl task files");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

// The formats a metric name takes: multiple choice and schemas, completions, or any.
void check_icl_format(const Args& a, const eval::IclTask& task) {
  const bool completion = task.format == eval::IclFormat::kCompletion;
  check_input(a.metric == "in-context" || completion == (a.metric == "completion"),
              task.path + ": a " + (completion ? "completion" : "multiple-choice") + " task, not --metric " + a.metric +
                  " (use --metric " + (completion ? "completion" : "multiple-choice") + ", or in-context for any)");
}

void print_icl_table(const Json& tasks) {
  std::printf("%-20s %-16s %5s %9s %9s %10s %8s %9s %6s\n", "task", "format", "shots", "accuracy", "acc_norm", "perplexity",
              "examples", "truncated", "ex/s");
  for (const auto& t : tasks) {
    auto figure = [&](const char* key) { return t.contains(key) ? std::to_string(t[key].get<double>()).substr(0, 6) : "-"; };
    std::printf("%-20s %-16s %5lld %9s %9s %10s %8lld %9lld %6.1f\n", t["task"].get<std::string>().c_str(),
                t["format"].get<std::string>().c_str(), static_cast<long long>(t["shots"].get<int64_t>()),
                figure("accuracy").c_str(), figure("accuracy_norm").c_str(), figure("perplexity").c_str(),
                static_cast<long long>(t["examples"].get<int64_t>()), static_cast<long long>(t["truncated"].get<int64_t>()),
                t["examples_per_second"].get<double>());
  }
}

// Zero- and few-shot scoring of a causal LM on one or more task files.
Json in_context(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device) {
  auto model = load_model(a, tok);
  const auto& family = models::family(model->model_type());
  check_input(!family.encoder_decoder && model->architecture() == family.text_to_text,
              a.checkpoint + ": --metric " + a.metric + " scores causal language models (GPT2LMHeadModel), not " +
                  model->architecture());
  std::vector<eval::IclTask> tasks;
  for (const auto& file : icl_files(a)) {
    tasks.push_back(eval::read_icl_task(file));
    check_icl_format(a, tasks.back());
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
  print_icl_table(results);
  Json r = results.size() == 1 ? results[0] : Json::object();
  r["tasks"] = results;
  r["seed"] = a.icl.seed, r["delimiter"] = a.icl.delimiter, r["example_delimiter"] = a.icl.example_delimiter;
  return r;
}

// Perplexity-like metrics over a text file or corpus: which apply is the family's to say.
Json corpus_metric(const Args& a, const tokenizer::Tokenizer& tok, c10::Device device, const std::string& work) {
  const Json config = load_json_file(a.checkpoint + "/config.json");
  const auto& family = models::family(config.value("model_type", ""));
  if (std::find(family.metrics.begin(), family.metrics.end(), a.metric) == family.metrics.end()) {
    throw InputError("--metric " + a.metric + " does not apply to a " + family.model_type + " checkpoint (" +
                     (family.metrics.empty() ? "it has no corpus metric" : "use " + join_names(family.metrics)) + ")");
  }
  auto corpus = data::open_corpus(a.data, tok, work, "data");
  const int64_t seq_len = a.seq_len > 0 ? a.seq_len : 128;
  if (a.metric == "perplexity") {
    auto model = load_model(a, tok);
    model->to(device);
    const int64_t positions = family.max_length(config);
    eval::SlidingWindow w{a.context > 0 ? a.context : positions, a.stride, a.batch_size};
    check_input(w.context <= positions, "--context exceeds the model's " + family.positions_key);
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

void run(const Args& a, const CLI::App& app) {
  const c10::Device device = init_runtime(a.runtime);
  const std::set<std::string> metrics = {"perplexity",     "mlm-perplexity",       "pseudo-perplexity", "span",
                                         "classification", "token-classification", "bleu",              "generation",
                                         "multiple-choice", "completion",          "in-context"};
  check_input(metrics.count(a.metric), "--metric '" + a.metric +
                                           "' is not one of perplexity, mlm-perplexity, pseudo-perplexity, span, "
                                           "classification, token-classification, bleu, generation, multiple-choice, "
                                           "completion, in-context");
  const bool icl = in_context_metric(a.metric);
  check_input(a.data_files.size() == 1 || icl, "--data is repeatable for the in-context metrics only");
  const bool writes_predictions = a.metric == "token-classification" || a.metric == "generation" || icl;
  check_input(a.predictions.empty() || writes_predictions,
              "--predictions applies to --metric token-classification, generation or the in-context metrics");
  if (!a.predictions.empty()) check_output_file(a.predictions, a.overwrite, "--predictions");
  // Parallel files are PREFIX.SRC and PREFIX.TGT: the reader names the one that is missing.
  const bool parallel = a.metric == "generation" && (app.count("--source-lang") || app.count("--target-lang") ||
                                                     finetune_info(a.checkpoint).value("source_lang", "") != "");
  if (!parallel && !icl) {
    check_input(fs::exists(a.data), a.data + ": no such file or corpus directory");
    if (!data::is_corpus(a.data)) check_readable_file(a.data);
  }
  check_result_file(a);
  check_input(tokenizer::Tokenizer::present(a.checkpoint),
              a.checkpoint + ": no tokenizer (evaluation needs the checkpoint's tokenizer)");
  const auto tok = tokenizer::Tokenizer::load(a.checkpoint);
  TempDir work("lmkit-eval");  // a text file's corpus, removed at the end
  Json r = a.metric == "classification"         ? classification(a, tok, device)
           : a.metric == "token-classification" ? token_classification(a, app, tok, device)
           : a.metric == "bleu"                 ? bleu(a, tok, device)
           : a.metric == "generation"           ? generation(a, app, tok, device)
           : icl                                ? in_context(a, tok, device)
                                                : corpus_metric(a, tok, device, work.path());
  r["metric"] = a.metric;
  r["checkpoint"] = a.checkpoint;
  r["data"] = icl ? Json(a.data_files) : Json(a.data);
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

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-evaluate: perplexity, masked-LM perplexity, span loss, classification metrics, token-classification "
               "F1, BLEU, or text-to-text generation scores of a checkpoint");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Args a;
  app.add_option("--checkpoint", a.checkpoint, "checkpoint directory (lmkit's or HuggingFace's, with its tokenizer)")->required();
  app.add_option("--data", a.data_files,
                 "text file, corpus directory, labelled file, source sentences (bleu); in-context: task files or "
                 "directories of them, repeatable")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--metric", a.metric,
                 "perplexity | mlm-perplexity | pseudo-perplexity | span | classification | token-classification | bleu | "
                 "generation | multiple-choice | completion | in-context")
      ->required();
  app.add_option("--output", a.output, "result JSON file (default result.json)");
  app.add_flag("--overwrite", a.overwrite, "replace --output (and --predictions) although lmkit-evaluate did not write it");
  app.add_option("--context", a.context, "perplexity: tokens per window (default: the model's maximum)")
      ->check(non_negative());
  app.add_option("--stride", a.stride, "perplexity: window step (default: = context)")->check(non_negative());
  app.add_option("--seq-len", a.seq_len,
                 "sequence length (mlm, pseudo, span; default 128) or max length (classification; default: the "
                 "finetuning's --max-length)")
      ->check(in_range(8, 1 << 16));
  app.add_option("--batch-size", a.batch_size, "sequences per batch")->check(positive());
  app.add_option("--max-sequences", a.max_sequences, "pseudo-perplexity: sequences scored (0: all)")
      ->check(non_negative());
  app.add_option("--text-column", a.columns.text, "classification: text column; token-classification: JSONL words field");
  app.add_option("--text-pair-column", a.columns.text_pair, "classification: second text column");
  app.add_option("--label-column", a.columns.label,
                 "classification: label column; token-classification: CoNLL tag column or JSONL tags field (default: "
                 "as finetuned)");
  app.add_option("--predictions", a.predictions, "token-classification: write 'word gold predicted' lines (CoNLL) here; generation: one "
                 "generated text per line");
  app.add_option("--references", a.references, "bleu: reference translations, one per line");
  app.add_option("--beams", a.beams, "bleu, generation: beam width (bleu: 4; generation: as finetuned, 1 is greedy)")
      ->check(positive());
  app.add_option("--max-new-tokens", a.max_new_tokens,
                 "bleu, generation: longest generated text (bleu: 64; generation: as finetuned)")
      ->check(positive());
  add_text_pair_flags(app, a.pairs, a.s2s, "generation", "--data", " (default: as finetuned)");
  app.add_flag("--rouge-stemmer,!--no-rouge-stemmer", a.rouge_stemmer,
               "generation: ROUGE over Porter-stemmed words, rouge-score's use_stemmer (default: as finetuned)");
  add_in_context_flags(app, a);
  add_runtime_flags(app, a.runtime);
  return run_app(app, argc, argv, [&] {
    check_input(a.metric == "generation" || !app.count("--rouge-stemmer"), "--rouge-stemmer applies to --metric generation");
    a.data = a.data_files.back();
    a.icl.batch_size = a.batch_size;
    a.icl.seed = app.count("--seed") ? a.runtime.seed : 1234;  // lm-evaluation-harness' few-shot seed
    run(a, app);
  });
}
