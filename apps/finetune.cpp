// lmkit-finetune: sequence(-pair) classification or regression (BERT: pooled
// [CLS]; GPT: last token; T5: encoder) and token classification (every family's
// *ForTokenClassification) from a pretrained checkpoint or from random
// initialisation, with dev evaluation each epoch, early stopping, the best
// checkpoint kept, a predictions file and result.json.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <fstream>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/data/token_tasks.h"
#include "lmkit/dist/start.h"
#include "lmkit/eval/classification.h"
#include "lmkit/eval/text_to_text.h"
#include "lmkit/eval/token_classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/trainer.h"
#include "text_pair_flags.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  TensorBoardFlags tensorboard;
  dist::GroupOptions dist;
  std::string checkpoint, init, model, tokenizer, train, dev, output, dtype = "fp32", task = "classification";
  data::ColumnSpec columns;
  data::TaggedFormat tagged;  ///< token classification
  bool label_all_subwords = false;
  data::PairSpec pairs;        ///< seq2seq: where sources and targets are
  data::Seq2SeqOptions s2s;    ///< seq2seq: prefix, separator, target length
  int64_t beams = 1, max_new_tokens = 0;
  std::string best_metric = "bleu";
  bool rouge_stemmer = false;
  int64_t epochs = 3, batch_size = 32, max_length = 128, patience = 0, max_train_examples = 0;
  double lr = 5e-5, weight_decay = 0.01, warmup_ratio = 0.1, clip = 1.0;
  bool resume = false, overwrite = false;
};

bool token_task(const Args& a) { return a.task == "token-classification"; }
bool seq2seq_task(const Args& a) { return a.task == "seq2seq"; }

// The family's head for the task: sequence or token classification, or text-to-text generation.
const std::string& head_of(const Args& a, const models::Family& family) {
  return seq2seq_task(a) ? family.text_to_text_or_error()
         : token_task(a) ? family.token_classifier_or_error()
                         : family.classifier_or_error();
}

// The model's config (the checkpoint's, or the preset's) and family, before the model exists.
const models::Family& family_of_run(const Args& a, Json* config) {
  *config = load_json_file(a.checkpoint.empty() ? a.model : a.checkpoint + "/config.json");
  check_input(config->contains("model_type") && (*config)["model_type"].is_string(),
              (a.checkpoint.empty() ? a.model : a.checkpoint + "/config.json") + ": key 'model_type' is required");
  return models::family((*config)["model_type"].get<std::string>());
}

// The model: the task's head on the pretrained body, or initialised at random.
// num_labels 0: a text-to-text model, whose head is the pretrained LM head.
std::shared_ptr<models::Model> make_model(const Args& a, const tokenizer::Tokenizer& tok, int64_t num_labels) {
  check_input(!a.checkpoint.empty() || !a.model.empty(), "--init random needs --model PRESET.json");
  Json config;
  const models::Family& family = family_of_run(a, &config);
  const std::string& head = head_of(a, family);
  std::shared_ptr<models::Model> model;
  if (!a.checkpoint.empty()) {
    // A classification head starts from random initialisation (listed on stderr), the body from the checkpoint.
    model = num_labels > 0 ? models::load_pretrained(a.checkpoint, head, nullptr, {{"num_labels", num_labels}}, /*new_head=*/true)
                           : models::load_pretrained(a.checkpoint, head);
  } else {
    config["vocab_size"] = tok.vocab_size();
    if (num_labels > 0) config["num_labels"] = num_labels;
    // A generator's special ids (decoder start, EOS) are the tokenizer's, as pretraining sets them.
    else family.adopt_vocabulary(config, tok.vocab_size(), tok.specials().pad, tok.specials().eos);
    model = models::create_model(config, a.model, head);
  }
  models::check_vocabulary(*model, tok.vocab_size(), "vocabulary mismatch");
  return model;
}

// One epoch of steps per evaluation; the best dev epoch (accuracy, or Pearson) is kept.
train::TrainerOptions trainer_options(const Args& a, int64_t per_epoch, std::shared_ptr<dist::Group> group) {
  train::TrainerOptions o;
  o.steps = a.epochs * per_epoch;
  o.schedule.schedule = train::Schedule::kLinear;
  o.schedule.lr = a.lr;
  o.schedule.warmup = static_cast<int64_t>(a.warmup_ratio * static_cast<double>(o.steps));
  o.weight_decay = a.weight_decay, o.clip = a.clip, o.eps = 1e-8;
  o.bf16 = a.dtype == "bf16";
  o.eval_every = per_epoch, o.save_every = 0, o.log_every = std::max<int64_t>(1, per_epoch / 20);
  o.output = a.output, o.resume = a.resume;
  o.tensorboard = a.tensorboard.resolve(a.output);
  o.patience = a.patience;
  o.best_metric = seq2seq_task(a) ? a.best_metric : token_task(a) ? "f1" : a.columns.regression ? "pearson" : "accuracy";
  o.higher_is_better = true;
  o.best_dir = a.output + "/best";
  o.group = std::move(group);
  return o;
}

// result.json: the best checkpoint's dev figures with when it was reached.
Json best_result(const Args& a, const Json& dev, const Json& summary, int64_t per_epoch) {
  Json result = dev;
  const int64_t best_step = summary.value("best_step", int64_t{0});
  result["best_step"] = best_step;
  result["best_epoch"] = per_epoch > 0 ? (best_step + per_epoch - 1) / per_epoch : 0;
  result["early_stopped"] = summary.value("early_stopped", false);
  result["train_loss"] = summary["train_loss"];
  result["init"] = a.checkpoint.empty() ? "random" : a.checkpoint;
  result["task"] = a.columns.regression ? "regression" : a.task;
  save_json_file(a.output + "/result.json", result);
  return result;
}

// What every task shares: the process group, the run directory, the tokenizer and its padding.
struct Session {
  explicit Session(dist::Started st) : started(std::move(st)) {}
  dist::Started started;
  bool leader = true;
  std::unique_ptr<RunLock> lock;
  tokenizer::Tokenizer tok;
  int32_t pad = -1;
};

Session open_session(const Args& a) {
  Session s(dist::start(a.runtime, a.dist));
  s.leader = !s.started.group || s.started.group->leader();
  check_input(a.checkpoint.empty() != (a.init != "random"), "give --checkpoint DIR or --init random (with --model and --tokenizer)");
  // A used run directory is continued (--resume) or replaced (--overwrite), never mixed with a new run.
  // One writer per run directory (rank 0 in a data-parallel job).
  if (s.leader) s.lock = train::open_run_directory(a.output, a.resume, a.overwrite);
  else make_output_directory(a.output);
  const std::string tok_path = !a.tokenizer.empty() ? a.tokenizer : a.checkpoint;
  check_input(!a.tokenizer.empty() || tokenizer::Tokenizer::present(a.checkpoint), a.checkpoint + ": no tokenizer (give --tokenizer)");
  s.tok = tokenizer::Tokenizer::load(tok_path);
  // Batches are padded with the pad token, or EOS where there is none (GPT-2's <|endoftext|>; masked out).
  s.pad = data::pad_id(s.tok);
  check_input(s.pad >= 0, tok_path + ": the tokenizer has neither a pad nor an end-of-text token to pad with");
  return s;
}

// What a task hands to the shared training loop.
struct Task {
  std::shared_ptr<data::Dataset> train_set;
  int64_t dev_examples = 0, num_labels = 0;
  std::function<Json(models::Model&)> evaluate;
  Json label_map;                                         ///< label (or tag) -> id
  std::function<void(const std::string& dir)> save_info;  ///< writes finetune.json into a checkpoint
};

// Trains the task's model with dev evaluation each epoch; returns the summary and sets per_epoch.
// Every checkpoint carries the tokenizer, label_map.json and finetune.json.
Json train_task(const Args& a, Session& s, const Json& resolved, Task task, int64_t& per_epoch) {
  auto model = make_model(a, s.tok, task.num_labels);
  const int64_t available = task.train_set->size(0);
  if (a.max_train_examples > 0 && a.max_train_examples < available) {
    task.train_set = std::make_shared<data::FirstExamples>(task.train_set, a.max_train_examples);
    if (s.leader) std::fprintf(stderr, "training on the first %lld of %lld examples (--max-train-examples)\n",
                               static_cast<long long>(a.max_train_examples), static_cast<long long>(available));
  }
  data::LoaderOptions lo;
  lo.batch_size = a.batch_size, lo.seed = a.runtime.seed, lo.pad_id = s.pad, lo.drop_last = false;
  // --batch-size is per rank: an epoch is batches of batch_size × ranks (the Trainer shards the loader itself).
  per_epoch = data::batches_per_epoch(*task.train_set, data::sharded(lo, s.started.group.get()), 0);
  check_input(per_epoch > 0, a.train + ": no examples to train on");
  train::TrainerOptions o = trainer_options(a, per_epoch, s.started.group);
  o.evaluator = task.evaluate;
  Json run_config = resolved;
  if (!task.label_map.is_null()) run_config["label_map"] = task.label_map;
  if (task.num_labels > 0) run_config["num_labels"] = task.num_labels;
  run_config["steps"] = o.steps;
  if (a.resume) train::check_resumed_flags(a.output, run_config, o.steps, /*allow_changes=*/false);
  if (s.leader) save_json_file(a.output + "/config.json", run_config);
  if (s.leader) {
    const std::string labels = task.num_labels > 0 ? ", " + std::to_string(task.num_labels) + " labels" : "";
    std::fprintf(stderr, "%s, %lld train / %lld dev examples%s, %lld steps\n", model->architecture().c_str(),
                 static_cast<long long>(task.train_set->size(0)), static_cast<long long>(task.dev_examples), labels.c_str(),
                 static_cast<long long>(o.steps));
  }
  auto save_extra = [&](const std::string& dir) {
    s.tok.save(dir);
    if (!task.label_map.is_null()) save_json_file(dir + "/label_map.json", task.label_map);
    task.save_info(dir);
  };
  train::Trainer trainer(model, o, task.train_set, lo, nullptr, lo, s.started.device, save_extra);
  return trainer.run();
}

std::shared_ptr<models::Model> load_best(const Args& a, c10::Device device) {
  auto best = models::load_pretrained(a.output + "/best");
  best->to(device);
  return best;
}

void run_classification(const Args& a, Session& s, const Json& resolved) {
  std::map<std::string, int64_t> label_map;
  if (!a.columns.regression) label_map = data::make_label_map(data::read_labelled_rows(a.train, a.columns));
  Task task;
  task.num_labels = a.columns.regression ? 1 : static_cast<int64_t>(label_map.size());
  check_input(a.columns.regression || task.num_labels >= 2, a.train + ": needs at least two labels");
  task.train_set = std::make_shared<data::ClassificationDataset>(a.train, a.columns, s.tok, a.max_length, label_map);
  auto dev_set = std::make_shared<data::ClassificationDataset>(a.dev, a.columns, s.tok, a.max_length, label_map);
  task.dev_examples = dev_set->size(0);
  const c10::Device device = s.started.device;
  task.evaluate = [&a, &s, dev_set, device](models::Model& m) {
    return eval::evaluate_classifier(m, dev_set, a.batch_size, s.pad, device);
  };
  task.label_map = label_map;
  task.save_info = [&a](const std::string& dir) { data::save_finetune_info(dir, a.max_length, a.columns); };
  int64_t per_epoch = 0;
  const Json summary = train_task(a, s, resolved, task, per_epoch);
  if (!s.leader) return;
  auto best = load_best(a, device);
  eval::Predictions p;
  const Json dev = eval::evaluate_classifier(*best, dev_set, a.batch_size, s.pad, device, &p);
  write_file_atomic(a.output + "/predictions.tsv", eval::predictions_tsv(p, label_map));
  const Json result = best_result(a, dev, summary, per_epoch);
  const auto epoch = static_cast<long long>(result["best_epoch"].get<int64_t>());
  if (a.columns.regression) {
    std::printf("best dev (epoch %lld): pearson %.4f, spearman %.4f\n", epoch, dev["pearson"].get<double>(),
                dev["spearman"].get<double>());
  } else {
    std::printf("best dev (epoch %lld): accuracy %.4f, macro-F1 %.4f, MCC %.4f\n", epoch, dev["accuracy"].get<double>(),
                dev["macro_f1"].get<double>(), dev["mcc"].get<double>());
  }
  std::printf("checkpoint: %s/best, predictions: %s/predictions.tsv\n", a.output.c_str(), a.output.c_str());
}

// finetune.json of a token classifier: how lmkit-evaluate reads its data the same way.
void save_token_task_info(const Args& a, const std::string& dir) {
  save_json_file(dir + "/finetune.json", {{"task", "token-classification"},
                                          {"max_length", a.max_length},
                                          {"label_all_subwords", a.label_all_subwords},
                                          {"tag_column", a.tagged.tag_column},
                                          {"tokens_field", a.tagged.tokens_field},
                                          {"tags_field", a.tagged.tags_field}});
}

void run_token_classification(const Args& a, Session& s, const Json& resolved) {
  const data::TokenTaskOptions options{a.max_length, a.label_all_subwords};
  auto train_sentences = data::read_tagged_sentences(a.train, a.tagged);
  const auto tag_map = data::make_tag_map(train_sentences);
  Task task;
  task.num_labels = static_cast<int64_t>(tag_map.size());
  check_input(task.num_labels >= 2, a.train + ": needs at least two tags");
  task.train_set = std::make_shared<data::TokenClassificationDataset>(std::move(train_sentences), a.train, s.tok, tag_map, options);
  auto dev_set = std::make_shared<data::TokenClassificationDataset>(data::read_tagged_sentences(a.dev, a.tagged), a.dev, s.tok,
                                                                    tag_map, options);
  task.dev_examples = dev_set->size(0);
  const c10::Device device = s.started.device;
  task.evaluate = [&a, &s, dev_set, &tag_map, device](models::Model& m) {
    return eval::evaluate_token_classifier(m, *dev_set, tag_map, a.batch_size, s.pad, device);
  };
  task.label_map = tag_map;
  task.save_info = [&a](const std::string& dir) { save_token_task_info(a, dir); };
  int64_t per_epoch = 0;
  const Json summary = train_task(a, s, resolved, task, per_epoch);
  if (!s.leader) return;
  auto best = load_best(a, device);
  std::vector<std::vector<std::string>> predicted;
  const Json dev = eval::evaluate_token_classifier(*best, *dev_set, tag_map, a.batch_size, s.pad, device, &predicted);
  write_file_atomic(a.output + "/predictions.conll", eval::predictions_conll(dev_set->sentences(), predicted));
  const Json result = best_result(a, dev, summary, per_epoch);
  std::printf("best dev (epoch %lld): entity F1 %.4f (precision %.4f, recall %.4f), token accuracy %.4f\n",
              static_cast<long long>(result["best_epoch"].get<int64_t>()), dev["f1"].get<double>(),
              dev["precision"].get<double>(), dev["recall"].get<double>(), dev["accuracy"].get<double>());
  std::printf("checkpoint: %s/best, predictions: %s/predictions.conll\n", a.output.c_str(), a.output.c_str());
}

// finetune.json of a text-to-text model: how lmkit-evaluate reads and generates the same way.
void save_seq2seq_info(const Args& a, const std::string& dir) {
  save_json_file(dir + "/finetune.json", {{"task", "seq2seq"},
                                          {"max_length", a.s2s.max_source_length},
                                          {"max_target_length", a.s2s.max_target_length},
                                          {"source_prefix", a.s2s.source_prefix},
                                          {"separator", a.s2s.separator},
                                          {"decoder_only", a.s2s.decoder_only},
                                          {"source_column", a.pairs.source},
                                          {"target_column", a.pairs.target},
                                          {"source_lang", a.pairs.source_lang},
                                          {"target_lang", a.pairs.target_lang},
                                          {"beams", a.beams},
                                          {"max_new_tokens", a.max_new_tokens},
                                          {"rouge_stemmer", a.rouge_stemmer}});
}

// Source and target lengths within the model's positions (a decoder-only model holds both in one sequence).
void check_seq2seq_lengths(const Args& a, const models::Family& family, const Json& config) {
  const int64_t positions = family.max_length(config);
  const int64_t source = a.s2s.max_source_length, target = a.s2s.max_target_length;
  const int64_t longest = family.encoder_decoder ? std::max(source, target) : source + target;
  check_input(positions == 0 || longest <= positions,
              "--max-length " + std::to_string(source) + (family.encoder_decoder ? " or" : " plus") +
                  " --max-target-length " + std::to_string(target) + " exceeds the model's " + std::to_string(positions) +
                  " positions");
  // Checked now, not at the first dev evaluation an epoch later.
  const int64_t room = family.encoder_decoder ? positions : target;
  check_input(room == 0 || a.max_new_tokens <= room,
              "--max-new-tokens " + std::to_string(a.max_new_tokens) + " exceeds " +
                  (family.encoder_decoder ? "the model's " + std::to_string(positions) + " positions"
                                          : "--max-target-length " + std::to_string(target) +
                                                " (a decoder-only model has room for the target only)"));
}

void print_generation(const char* what, const Json& r) {
  std::printf("%s: BLEU %.2f, exact match %.2f, F1 %.2f, ROUGE-1/2/L %.2f/%.2f/%.2f\n", what, r["bleu"].get<double>(),
              r["exact_match"].get<double>(), r["f1"].get<double>(), r["rouge1"].get<double>(),
              r["rouge2"].get<double>(), r["rougeL"].get<double>());
}

// The text-to-text sets (a decoder-only family lays each pair out as one sequence).
std::pair<std::shared_ptr<data::Seq2SeqDataset>, std::shared_ptr<data::Seq2SeqDataset>> seq2seq_sets(Args& b, const Session& s) {
  Json config;
  const models::Family& family = family_of_run(b, &config);
  family.text_to_text_or_error();
  check_seq2seq_lengths(b, family, config);
  b.s2s.decoder_only = !family.encoder_decoder;
  auto train_set = std::make_shared<data::Seq2SeqDataset>(data::read_text_pairs(b.train, b.pairs), b.train, s.tok, b.s2s);
  auto dev_set = std::make_shared<data::Seq2SeqDataset>(data::read_text_pairs(b.dev, b.pairs), b.dev, s.tok, b.s2s);
  if (s.leader && train_set->truncated_sources() + train_set->truncated_targets() > 0) {
    std::fprintf(stderr, "%s: %lld sources cut to --max-length, %lld targets to --max-target-length\n", b.train.c_str(),
                 static_cast<long long>(train_set->truncated_sources()), static_cast<long long>(train_set->truncated_targets()));
  }
  return {train_set, dev_set};
}

void run_seq2seq(Args b, Session& s, const Json& resolved) {
  const auto [train_set, dev_set] = seq2seq_sets(b, s);
  Task task;
  task.train_set = train_set;
  task.dev_examples = dev_set->size(0);
  const c10::Device device = s.started.device;
  const eval::GenerationOptions g = eval::text_generation_options(b.beams, b.max_new_tokens, b.s2s.max_target_length);
  task.evaluate = [&b, &s, dev = dev_set, g, device](models::Model& m) {
    return eval::evaluate_text_to_text(m, s.tok, *dev, g, b.batch_size, s.pad, device, nullptr, b.rouge_stemmer);
  };
  task.save_info = [&b](const std::string& dir) { save_seq2seq_info(b, dir); };
  int64_t per_epoch = 0;
  const Json summary = train_task(b, s, resolved, task, per_epoch);
  if (!s.leader) return;
  auto best = load_best(b, device);
  std::vector<std::string> predictions;
  const Json dev = eval::evaluate_text_to_text(*best, s.tok, *dev_set, g, b.batch_size, s.pad, device, &predictions,
                                               b.rouge_stemmer);
  write_file_atomic(b.output + "/predictions.txt", eval::predictions_lines(predictions));
  const Json result = best_result(b, dev, summary, per_epoch);
  const std::string what = "best dev (epoch " + std::to_string(result["best_epoch"].get<int64_t>()) + ")";
  print_generation(what.c_str(), dev);
  std::printf("checkpoint: %s/best, predictions: %s/predictions.txt\n", b.output.c_str(), b.output.c_str());
}

void run(const Args& a, const Json& resolved) {
  check_input(!token_task(a) || !a.columns.regression, "--regression applies to --task classification only");
  Session s = open_session(a);
  if (seq2seq_task(a)) run_seq2seq(a, s, resolved);
  else if (token_task(a)) run_token_classification(a, s, resolved);
  else run_classification(a, s, resolved);
}

// --text-column, --label-column and --format as token classification reads them.
void set_tagged_format(const CLI::App& app, Args& a) {
  a.tagged.format = a.columns.format;
  if (app.count("--text-column")) a.tagged.tokens_field = a.columns.text;
  if (app.count("--label-column")) data::set_tag_source(a.tagged, a.columns.label);
}

// The flags of --task seq2seq.
void add_seq2seq_flags(CLI::App& app, Args& a) {
  add_text_pair_flags(app, a.pairs, a.s2s, "seq2seq", "--train", "");
  app.add_option("--beams", a.beams, "seq2seq: dev generation by beam search of this width (1: greedy)")->check(positive());
  app.add_option("--max-new-tokens", a.max_new_tokens, "seq2seq: longest generated text (default: --max-target-length)")
      ->check(non_negative());
  app.add_option("--best-metric", a.best_metric, "seq2seq: the dev figure that picks the best epoch")
      ->check(CLI::IsMember({"bleu", "exact_match", "f1", "rouge1", "rouge2", "rougeL"}));
  app.add_flag("--rouge-stemmer", a.rouge_stemmer, "seq2seq: ROUGE over Porter-stemmed words (rouge-score's use_stemmer)");
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-finetune: sequence(-pair) classification, regression, token classification (NER) or text-to-text "
               "generation from a pretrained checkpoint or random initialisation");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  Args a;
  app.add_option("--checkpoint", a.checkpoint, "pretrained checkpoint directory (BERT, GPT-2 or T5)");
  app.add_option("--init", a.init, "'random': no pretraining (with --model and --tokenizer)");
  app.add_option("--model", a.model, "model preset for --init random");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer directory, PATH.model or tokenizer.json (default: the checkpoint's)");
  app.add_option("--task", a.task, "classification (of a text or pair; --regression for numbers), token-classification, "
                 "or seq2seq (text-to-text: T5, the Transformer, GPT-2)")
      ->check(CLI::IsMember({"classification", "token-classification", "seq2seq"}));
  app.add_option("--train", a.train, "training file: TSV, CSV or JSONL (token classification: CoNLL or JSONL)")->required();
  app.add_option("--dev", a.dev, "dev file, same format")->required();
  app.add_option("--output", a.output, "run directory")->required();
  app.add_option("--text-column", a.columns.text, "text column: header name or 0-based index (token classification: "
                 "the JSONL words field, default tokens)");
  app.add_option("--text-pair-column", a.columns.text_pair, "second text column for sentence pairs");
  app.add_option("--label-column", a.columns.label, "label column: header name or 0-based index (token classification: "
                 "the CoNLL tag column, default the last; or the JSONL tags field, default tags)");
  app.add_option("--format", a.columns.format, "auto (by extension), tsv, csv or jsonl (token classification: conll or jsonl)");
  app.add_flag("--label-all-subwords", a.label_all_subwords,
               "token classification: every subword carries its word's tag (B-X continued as I-X), not only the first");
  add_seq2seq_flags(app, a);
  app.add_flag("--regression", a.columns.regression, "numeric labels, one output (MSE; Pearson/Spearman)");
  app.add_option("--epochs", a.epochs, "passes over the training data")->check(positive());
  app.add_option("--max-train-examples", a.max_train_examples,
                 "train on the first N examples only (a long sentence's windows count one each; 0: all)")
      ->check(non_negative());
  app.add_option("--lr", a.lr, "peak learning rate (linear warmup and decay)")->check(positive());
  app.add_option("--batch-size", a.batch_size, "examples per batch")->check(positive());
  app.add_option("--max-length", a.max_length, "tokens per example, special tokens included")->check(in_range(4, 1 << 16));
  app.add_option("--weight-decay", a.weight_decay, "AdamW weight decay")->check(non_negative());
  app.add_option("--warmup-ratio", a.warmup_ratio, "fraction of steps warming up")->check(in_range(0.0, 1.0));
  app.add_option("--clip", a.clip, "gradient-norm clip (0: off)")->check(non_negative());
  app.add_option("--dtype", a.dtype, "fp32, or bf16 autocast with float32 master weights")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--patience", a.patience, "stop after N epochs without dev improvement (0: never)")
      ->check(non_negative());
  app.add_flag("--resume", a.resume, "continue the run in OUTPUT from its latest checkpoint (after a stop or a signal)");
  app.add_flag("--overwrite", a.overwrite, "replace the earlier run in OUTPUT (its checkpoints, predictions and results)");
  add_runtime_flags(app, a.runtime);
  add_tensorboard_flags(app, a.tensorboard);
  dist::add_distributed_flags(app, a.dist);
  add_config_flag(app);
  return run_app(app, argc, argv, [&] {
    if (token_task(a)) set_tagged_format(app, a);
    for (const char* flag : {"--source-column", "--target-column", "--source-lang", "--target-lang", "--source-prefix",
                             "--separator", "--max-target-length", "--beams", "--max-new-tokens", "--best-metric",
                             "--rouge-stemmer"}) {
      check_input(seq2seq_task(a) || !app.count(flag), std::string(flag) + " applies to --task seq2seq");
    }
    a.pairs.format = a.columns.format;
    a.s2s.max_source_length = a.max_length;
    run(a, resolved_options(app));
  });
}
