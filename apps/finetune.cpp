// lmkit-finetune: sequence(-pair) classification or regression from a
// pretrained checkpoint (BERT: pooled [CLS]; GPT: last token; T5: encoder) or
// from random initialisation, with dev evaluation each epoch, early stopping,
// the best checkpoint kept, a predictions file and result.json.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>

#include "lmkit/core/app.h"
#include "lmkit/core/file.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/dist/start.h"
#include "lmkit/eval/classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/trainer.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  dist::GroupOptions dist;
  std::string checkpoint, init, model, tokenizer, train, dev, output, dtype = "fp32";
  data::ColumnSpec columns;
  int64_t epochs = 3, batch_size = 32, max_length = 128, patience = 0;
  double lr = 5e-5, weight_decay = 0.01, warmup_ratio = 0.1, clip = 1.0;
  bool resume = false, overwrite = false;
};

// The model: a classifier on the pretrained body, or initialised at random.
std::shared_ptr<models::Model> make_classifier(const Args& a, const tokenizer::Tokenizer& tok, int64_t num_labels) {
  std::shared_ptr<models::Model> model;
  if (!a.checkpoint.empty()) {
    const Json config = load_json_file(a.checkpoint + "/config.json");
    const std::string& head = models::family(config.value("model_type", "")).classifier_or_error();
    // The classification head starts from random initialisation (listed on stderr), the body from the checkpoint.
    model = models::load_pretrained(a.checkpoint, head, nullptr, {{"num_labels", num_labels}}, /*new_head=*/true);
  } else {
    check_input(!a.model.empty(), "--init random needs --model PRESET.json");
    Json config = load_json_file(a.model);
    check_input(config.contains("model_type") && config["model_type"].is_string(), a.model + ": key 'model_type' is required");
    config["vocab_size"] = tok.vocab_size();
    config["num_labels"] = num_labels;
    model = models::create_model(config, a.model, models::family(config["model_type"].get<std::string>()).classifier_or_error());
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
  o.patience = a.patience;
  o.best_metric = a.columns.regression ? "pearson" : "accuracy";
  o.higher_is_better = true;
  o.best_dir = a.output + "/best";
  o.group = std::move(group);
  return o;
}

// The best checkpoint's dev figures, predictions.tsv and result.json.
void report_best(const Args& a, const Json& summary, std::shared_ptr<const data::Dataset> dev_set,
                 const std::map<std::string, int64_t>& label_map, int32_t pad, int64_t per_epoch, c10::Device device) {
  auto best = models::load_pretrained(a.output + "/best");
  best->to(device);
  eval::Predictions p;
  const Json dev = eval::evaluate_classifier(*best, std::move(dev_set), a.batch_size, pad, device, &p);
  write_file_atomic(a.output + "/predictions.tsv", eval::predictions_tsv(p, label_map));
  Json result = dev;
  const int64_t best_step = summary.value("best_step", int64_t{0});
  result["best_step"] = best_step;
  result["best_epoch"] = per_epoch > 0 ? (best_step + per_epoch - 1) / per_epoch : 0;
  result["early_stopped"] = summary.value("early_stopped", false);
  result["train_loss"] = summary["train_loss"];
  result["init"] = a.checkpoint.empty() ? "random" : a.checkpoint;
  save_json_file(a.output + "/result.json", result);
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

void run(const Args& a, const Json& resolved) {
  const dist::Started started = dist::start(a.runtime, a.dist);
  const c10::Device device = started.device;
  const bool leader = !started.group || started.group->leader();
  check_input(a.checkpoint.empty() != (a.init != "random"), "give --checkpoint DIR or --init random (with --model and --tokenizer)");
  // A used run directory is continued (--resume) or replaced (--overwrite), never mixed with a new run.
  // One writer per run directory (rank 0 in a data-parallel job).
  std::unique_ptr<RunLock> lock;
  if (leader) lock = train::open_run_directory(a.output, a.resume, a.overwrite);
  else make_output_directory(a.output);

  const std::string tok_path = !a.tokenizer.empty() ? a.tokenizer : a.checkpoint;
  check_input(!a.tokenizer.empty() || tokenizer::Tokenizer::present(a.checkpoint), a.checkpoint + ": no tokenizer (give --tokenizer)");
  const auto tok = tokenizer::Tokenizer::load(tok_path);
  // Batches are padded with the pad token, or EOS where there is none (GPT-2's <|endoftext|>; masked out).
  const int32_t pad = data::pad_id(tok);
  check_input(pad >= 0, tok_path + ": the tokenizer has neither a pad nor an end-of-text token to pad with");
  std::map<std::string, int64_t> label_map;
  if (!a.columns.regression) label_map = data::make_label_map(data::read_labelled_rows(a.train, a.columns));
  const int64_t num_labels = a.columns.regression ? 1 : static_cast<int64_t>(label_map.size());
  check_input(a.columns.regression || num_labels >= 2, a.train + ": needs at least two labels");
  auto train_set = std::make_shared<data::ClassificationDataset>(a.train, a.columns, tok, a.max_length, label_map);
  auto dev_set = std::make_shared<data::ClassificationDataset>(a.dev, a.columns, tok, a.max_length, label_map);
  auto model = make_classifier(a, tok, num_labels);

  data::LoaderOptions lo;
  lo.batch_size = a.batch_size, lo.seed = a.runtime.seed, lo.pad_id = pad, lo.drop_last = false;
  // --batch-size is per rank: an epoch is batches of batch_size × ranks (the Trainer shards the loader itself).
  const int64_t per_epoch = data::batches_per_epoch(*train_set, data::sharded(lo, started.group.get()), 0);
  check_input(per_epoch > 0, a.train + ": no examples to train on");
  train::TrainerOptions o = trainer_options(a, per_epoch, started.group);
  o.evaluator = [&](models::Model& m) { return eval::evaluate_classifier(m, dev_set, a.batch_size, pad, device); };
  auto save_extra = [&](const std::string& dir) {
    tok.save(dir);
    save_json_file(dir + "/label_map.json", Json(label_map));
    data::save_finetune_info(dir, a.max_length, a.columns);
  };
  Json run_config = resolved;
  run_config["num_labels"] = num_labels, run_config["label_map"] = label_map, run_config["steps"] = o.steps;
  if (a.resume) train::check_resumed_flags(a.output, run_config, o.steps, /*allow_changes=*/false);
  if (leader) save_json_file(a.output + "/config.json", run_config);
  if (leader) std::fprintf(stderr, "%s, %lld train / %lld dev examples, %lld labels, %lld steps\n", model->architecture().c_str(),
               static_cast<long long>(train_set->size(0)), static_cast<long long>(dev_set->size(0)),
               static_cast<long long>(num_labels), static_cast<long long>(o.steps));

  train::Trainer trainer(model, o, train_set, lo, nullptr, lo, device, save_extra);
  const Json summary = trainer.run();
  if (leader) report_best(a, summary, dev_set, label_map, pad, per_epoch, device);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("lmkit-finetune: sequence(-pair) classification from a pretrained checkpoint or random initialisation");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  Args a;
  app.add_option("--checkpoint", a.checkpoint, "pretrained checkpoint directory (BERT, GPT-2 or T5)");
  app.add_option("--init", a.init, "'random': no pretraining (with --model and --tokenizer)");
  app.add_option("--model", a.model, "model preset for --init random");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer directory, PATH.model or tokenizer.json (default: the checkpoint's)");
  app.add_option("--train", a.train, "training file: TSV, CSV or JSONL")->required();
  app.add_option("--dev", a.dev, "dev file, same format")->required();
  app.add_option("--output", a.output, "run directory")->required();
  app.add_option("--text-column", a.columns.text, "text column: header name or 0-based index");
  app.add_option("--text-pair-column", a.columns.text_pair, "second text column for sentence pairs");
  app.add_option("--label-column", a.columns.label, "label column: header name or 0-based index");
  app.add_option("--format", a.columns.format, "auto (by extension), tsv, csv or jsonl");
  app.add_flag("--regression", a.columns.regression, "numeric labels, one output (MSE; Pearson/Spearman)");
  app.add_option("--epochs", a.epochs, "passes over the training data")->check(positive());
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
  dist::add_distributed_flags(app, a.dist);
  add_config_flag(app);
  return run_app(app, argc, argv, [&] { run(a, resolved_options(app)); });
}
