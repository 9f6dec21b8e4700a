#include "lmkit/tasks/finetune.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/dist/group.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tokenizer/tokenizer.h"
#include "lmkit/train/run.h"
#include "lmkit/train/trainer.h"

namespace fs = std::filesystem;

namespace lmkit::tasks {

namespace {

// The model's config (the checkpoint's, or the preset's) and its family, before the model exists:
// as the family that has the task's head (an MAE checkpoint finetunes as a ViT).
const models::Family& family_of_run(const FinetuneOptions& a, const std::string& head, Json* config) {
  check_input(!a.checkpoint.empty() || !a.model.empty(), "--init random needs --model PRESET.json");
  check_input(a.checkpoint.empty() || fs::is_directory(a.checkpoint),
              "--checkpoint " + a.checkpoint + ": no such checkpoint directory");
  const std::string file = a.checkpoint.empty() ? a.model : a.checkpoint + "/config.json";
  *config = models::finetuning_config(load_json_file(file), head, file);
  return models::family_of_config(*config, file);
}

// An image model's head (no vocabulary to fit).
std::shared_ptr<models::Model> make_image_model(const FinetuneOptions& a, const Context& c, const std::string& head,
                                                const Json& overrides) {
  if (!a.checkpoint.empty()) return models::load_pretrained(a.checkpoint, head, nullptr, overrides, /*new_head=*/true);
  Json config = c.model_config;
  config.update(overrides);
  return models::create_model(config, a.model, head);
}

// The task's head on the pretrained body, or initialised at random. num_labels 0: the
// family's own generator, whose head is the pretrained LM head.
std::shared_ptr<models::Model> make_model(const FinetuneOptions& a, const Context& c, const std::string& head,
                                          int64_t num_labels) {
  const tokenizer::Tokenizer& tok = c.tokenizer;
  std::shared_ptr<models::Model> model;
  // A classifier records the pad it is batched with (EOS where the tokenizer has none) where its
  // config names none: HF's decoder-only *ForSequenceClassification finds each row's last token
  // through pad_token_id, and refuses a batch of several rows without one.
  Json overrides = {{"num_labels", num_labels}};
  const bool no_pad = c.model_config.contains("pad_token_id") && c.model_config["pad_token_id"].is_null();
  if (num_labels > 0 && no_pad && c.pad_id >= 0) overrides["pad_token_id"] = c.pad_id;
  // Longformer's and BigBird's question-answering heads find the question by sep_token_id
  // (global attention, BigBird's question mask): the tokenizer's separator, whatever the preset said.
  const std::string type = c.model_config.value("model_type", "");
  if (c.family.head(models::kQuestionAnsweringHead) == head && (type == "longformer" || type == "big_bird") &&
      tok.specials().sep >= 0) {
    overrides["sep_token_id"] = tok.specials().sep;
  }
  if (c.family.images) return make_image_model(a, c, head, overrides);
  if (!a.checkpoint.empty()) {
    // A new head starts from random initialisation (listed on stderr), the body from the checkpoint.
    model = num_labels > 0 ? models::load_pretrained(a.checkpoint, head, nullptr, overrides, /*new_head=*/true)
                           : models::load_pretrained(a.checkpoint, head);
  } else {
    Json config = c.model_config;
    config["vocab_size"] = tok.vocab_size();
    if (num_labels > 0) config.update(overrides);
    // A generator's special ids (decoder start, EOS) are the tokenizer's, as pretraining sets them.
    else c.family.fit_vocabulary(config, tok.vocab_size(), tok.specials().pad, tok.specials().eos);
    model = models::create_model(config, a.model, head);
  }
  models::check_vocabulary(*model, tok.vocab_size(), "vocabulary mismatch");
  return model;
}

// One epoch of steps per evaluation; the best dev epoch (the task's figure) is kept.
train::TrainerOptions trainer_options(const FinetuneOptions& a, const Task& task, int64_t per_epoch,
                                      std::shared_ptr<dist::Group> group) {
  train::TrainerOptions o;
  o.steps = a.epochs * per_epoch;
  o.schedule.schedule = train::Schedule::kLinear;
  o.schedule.lr = a.lr;
  o.schedule.warmup = static_cast<int64_t>(a.warmup_ratio * static_cast<double>(o.steps));
  o.optimizer = a.optimizer;
  o.optimizer.weight_decay = a.weight_decay;
  o.parallel = a.parallel;
  o.clip = a.clip;
  o.bf16 = a.dtype == "bf16";
  o.bf16_weights = a.dtype == "bf16-weights";
  o.recompute = a.recompute;
  o.accumulation = a.accumulation;
  o.accumulate_within_epoch = true;  // each epoch ends on its own step, for its dev evaluation
  o.eval_every = per_epoch;
  o.save_every = 0;
  o.log_every = std::max<int64_t>(1, per_epoch / 20);
  o.output = a.output;
  o.resume = a.resume;
  o.tensorboard = a.tensorboard.resolve(a.output);
  o.patience = a.patience;
  o.best_metric = task.best_metric();
  o.higher_is_better = true;
  o.best_dir = a.output + "/best";
  o.optimizer_in_exports = false;  // best/ and final/ are models: a run resumes from checkpoints/step-N
  o.group = std::move(group);
  return o;
}

// result.json: the best checkpoint's dev figures with when it was reached.
Json best_result(const FinetuneOptions& a, const Task& task, const Json& dev, const Json& summary, int64_t per_epoch) {
  Json result = dev;
  const int64_t best_step = summary.value("best_step", int64_t{0});
  result["best_step"] = best_step;
  result["best_epoch"] = per_epoch > 0 ? (best_step + per_epoch - 1) / per_epoch : 0;
  result["early_stopped"] = summary.value("early_stopped", false);
  result["train_loss"] = summary["train_loss"];
  result["skipped_steps"] = summary.value("skipped_steps", int64_t{0});
  result["init"] = a.checkpoint.empty() ? "random" : a.checkpoint;
  result["task"] = task.result_name();
  result["steps_per_epoch"] = per_epoch;
  result["kept"] = a.keep;
  save_json_file(a.output + "/result.json", result);
  return result;
}

// The run's summary on stdout: the best dev figures, the steps skipped, where the outputs are.
void print_result(const FinetuneOptions& a, const TaskSpec& spec, const std::string& figures, const Json& result,
                  const Json& summary) {
  std::printf("best dev (epoch %lld): %s\n", static_cast<long long>(result["best_epoch"].get<int64_t>()), figures.c_str());
  if (const int64_t skipped = result["skipped_steps"].get<int64_t>(); skipped > 0) {
    std::printf("skipped: %lld of %lld steps (a non-finite loss or gradient: no update)\n", static_cast<long long>(skipped),
                static_cast<long long>(summary.value("steps", int64_t{0})));
  }
  std::printf("checkpoint: %s/best, predictions: %s/%s\n", a.output.c_str(), a.output.c_str(), spec.predictions.c_str());
}

// The first --max-train-examples of the training set, said on stderr.
void limit_examples(const FinetuneOptions& a, Prepared& p, bool leader) {
  const int64_t available = p.train_set->size(0);
  if (a.max_train_examples <= 0 || a.max_train_examples >= available) return;
  p.train_set = std::make_shared<data::FirstExamples>(p.train_set, a.max_train_examples);
  if (leader) std::fprintf(stderr, "training on the first %lld of %lld examples (--max-train-examples)\n",
                           static_cast<long long>(a.max_train_examples), static_cast<long long>(available));
}

// config.json's id2label and label2id with the label map's names (HF's pipelines name a class by
// them; the model writes LABEL_i), where the map names each of the head's classes.
void name_classes(const std::string& dir, const Json& label_map) {
  if (!label_map.is_object() || label_map.empty()) return;
  const std::string file = dir + "/config.json";
  Json config = load_json_file(file);
  if (!config.contains("id2label") || config["id2label"].size() != label_map.size()) return;
  Json id2label = Json::object(), label2id = Json::object();
  for (auto it = label_map.begin(); it != label_map.end(); ++it) {
    id2label[std::to_string(it.value().get<int64_t>())] = it.key();
    label2id[it.key()] = it.value();
  }
  if (id2label.size() != label_map.size()) return;  // two names for one class: leave HF's defaults
  config["id2label"] = id2label;
  config["label2id"] = label2id;
  save_json_file(file, config);
}

// Trains with dev evaluation each epoch; returns the trainer's summary and sets per_epoch.
// Every checkpoint carries the tokenizer, label_map.json and finetune.json.
Json train_task(const FinetuneOptions& a, const train::Run& run, const Context& c, Task& task, Prepared& p, const Json& resolved,
           int64_t& per_epoch) {
  auto model = make_model(a, c, head_of(tasks::task(a.task), c.family), p.num_labels);
  limit_examples(a, p, run.leader);
  data::LoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.seed = a.runtime.seed;
  lo.pad_id = c.pad_id;
  lo.drop_last = false;
  // --batch-size is per rank: an epoch is batches of batch_size × ranks (the Trainer shards the loader itself).
  const int64_t batches = data::batches_per_epoch(*p.train_set, data::sharded(lo, run.group()), 0);
  check_input(batches > 0, a.train + ": no examples to train on");
  per_epoch = (batches + a.accumulation - 1) / a.accumulation;  // optimizer steps: the last takes what is left
  train::TrainerOptions o = trainer_options(a, task, per_epoch, run.started.group);
  o.evaluator = [&p](models::Model& m) { return p.evaluate(m, ""); };
  Json run_config = resolved;
  if (!p.label_map.is_null()) run_config["label_map"] = p.label_map;
  if (p.num_labels > 0) run_config["num_labels"] = p.num_labels;
  run_config["steps"] = o.steps;
  auto write_config = run.record_config(run_config, o.steps, /*allow_changes=*/false);
  if (run.leader) {
    const std::string labels = p.num_labels > 0 ? ", " + std::to_string(p.num_labels) + " labels" : "";
    std::fprintf(stderr, "%s, %lld train / %lld dev examples%s, %lld steps\n", model->architecture().c_str(),
                 static_cast<long long>(p.train_set->size(0)), static_cast<long long>(p.dev_examples), labels.c_str(),
                 static_cast<long long>(o.steps));
  }
  auto save_extra = [&](const std::string& dir) {
    if (!c.tokenizer.empty()) c.tokenizer.save(dir);
    for (const auto& [name, content] : p.files) save_json_file(dir + "/" + name, content);
    if (!p.label_map.is_null()) save_json_file(dir + "/label_map.json", p.label_map);
    name_classes(dir, p.label_map);
    save_info(dir, a.task, a.max_length, task.info());
  };
  train::TrainerInputs in;
  in.model = model;
  in.train = p.train_set;
  in.loader = lo;
  in.device = c.device;
  in.save_extra = save_extra;
  in.on_restored = std::move(write_config);
  train::Trainer trainer(std::move(in), o);
  return trainer.run();
}

// A finished run that kept best/ alone (--keep best) has no checkpoint to resume from: its
// result.json says it finished, and --resume evaluates best/ again instead of training anew.
std::optional<Json> finished_keeping_best(const FinetuneOptions& a) {
  const std::string result = a.output + "/result.json";
  if (!a.resume || !fs::exists(result) || !train::latest_checkpoint(a.output).empty()) return {};
  const Json j = load_json_file(result);
  if (!j.is_object() || j.value("kept", "") != "best" || !fs::exists(a.output + "/best/config.json")) return {};
  return j;
}

// --keep best: once the run is finished, final/ and the step checkpoints go.
// The `latest` pointer goes first: a run killed while these go is still "finished".
void drop_all_but_best(const FinetuneOptions& a) {
  if (a.keep != "best") return;
  for (const char* path : {"checkpoints/latest", "checkpoints", "final"}) {
    std::error_code ec;
    fs::remove_all(a.output + "/" + path, ec);
    if (ec) throw RuntimeError(a.output + "/" + path + ": cannot remove it (--keep best): " + ec.message());
  }
}

// The tokenizer (--tokenizer, else the checkpoint's); an image model's tasks get the empty one.
tokenizer::Tokenizer run_tokenizer(const FinetuneOptions& a, const models::Family& family) {
  if (family.images) {
    check_input(a.tokenizer.empty(), "--tokenizer: model_type '" + family.model_type + "' reads images, not text");
    return tokenizer::Tokenizer{};
  }
  check_input(!a.tokenizer.empty() || tokenizer::Tokenizer::present(a.checkpoint), a.checkpoint + ": no tokenizer (give --tokenizer)");
  return tokenizer::Tokenizer::load(!a.tokenizer.empty() ? a.tokenizer : a.checkpoint);
}

// The task's examples, read and tokenized: SIGTERM/SIGINT stop that too (tens of seconds on
// a file of 400,000 rows), exit 3. Under data parallelism a rank does not leave alone: its
// peers would wait for it in the first step (a scheduler signals every rank anyway).
Prepared prepare_stoppable(Task& task, const Context& c, const FinetuneOptions& a, bool alone) {
  if (!alone) return task.prepare(c, a.train, a.dev);
  try {
    StopSignals signals;
    Prepared p = task.prepare(c, a.train, a.dev);
    check_stop(kPreparingExamples);
    return p;
  } catch (const Interrupted& e) {
    throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": training had not started, so there is nothing to " +
                                            "resume; the same command starts the run again");
  }
}

}  // namespace

void add_training_flags(CLI::App& app, FinetuneOptions& a) {
  app.add_option("--epochs", a.epochs, "passes over the training data")->check(positive());
  app.add_option("--max-train-examples", a.max_train_examples,
                 "train on the first N examples only (a long sentence's windows count one each; 0: all)")
      ->check(non_negative());
  app.add_option("--max-dev-examples", a.max_dev_examples,
                 "evaluate on the dev file's first N examples (rows, sentences or pairs; 0: all)")
      ->check(non_negative());
  app.add_option("--lr", a.lr, "peak learning rate (linear warmup and decay)")->check(positive());
  app.add_option("--batch-size", a.batch_size, "examples per batch")->check(positive());
  app.add_option("--max-length", a.max_length, "tokens per example, special tokens included")->check(in_range(4, 1 << 16));
  app.add_option("--weight-decay", a.weight_decay, "decoupled weight decay (not on biases and norms)")->check(non_negative());
  app.add_option("--warmup-ratio", a.warmup_ratio, "fraction of steps warming up")->check(in_range(0.0, 1.0));
  app.add_option("--clip", a.clip, "gradient-norm clip (0: off)")->check(non_negative());
  app.add_option("--dtype", a.dtype,
                 "fp32; bf16 (autocast, float32 master weights); or bf16-weights (bf16 weights in the step, float32 masters)")
      ->check(CLI::IsMember({"fp32", "bf16", "bf16-weights"}));
  app.add_option("--accumulation", a.accumulation,
                 "batches per optimizer step (an epoch's last step takes the batches left; each epoch is "
                 "ceil(batches / N) steps)")
      ->check(positive());
  app.add_flag("--recompute", a.recompute,
               "recompute each layer's activations in backward instead of keeping them (less memory, about a third more "
               "compute; the same gradients)");
  app.add_option("--patience", a.patience, "stop after N epochs without dev improvement (0: never)")
      ->check(non_negative());
}

Json finetune(const FinetuneOptions& options, Task& task, const Json& resolved, const CLI::App* app) {
  FinetuneOptions a = options;
  const TaskSpec& spec = tasks::task(a.task);
  check_input(a.checkpoint.empty() != (a.init != "random"), "give --checkpoint DIR or --init random (with --model and --tokenizer)");
  // Every task's predictions file is a finetuning run's own (a run directory may be reused for another task).
  std::vector<std::string> predictions;
  for (const auto& t : tasks()) predictions.push_back(t.predictions);
  const train::Run run = train::open_run(a.runtime, a.dist, a.output, a.resume, a.overwrite, predictions);
  train::check_parallel_flags(a.parallel, a.optimizer.name, run.group() != nullptr);  // before the data
  if (run.leader) a.tensorboard.check();
  Json config;
  const models::Family& family = family_of_run(a, spec.head, &config);
  head_of(spec, family);
  const tokenizer::Tokenizer tok = run_tokenizer(a, family);
  // Batches are padded with the pad token, or EOS where there is none (GPT-2's <|endoftext|>; masked out).
  const int32_t pad = data::pad_id(tok);
  check_input(pad >= 0 || family.images, (a.tokenizer.empty() ? a.checkpoint : a.tokenizer) +
                                             ": the tokenizer has neither a pad nor an end-of-text token to pad with");
  // Said before training, not when the first long example reaches the model. The default
  // length is fitted to a model with fewer positions, and says so.
  const int64_t positions = family.max_length(config);
  if (positions > 0 && a.max_length > positions && app && !app->count("--max-length")) {
    if (run.leader) std::fprintf(stderr, "--max-length %lld (the model's positions; the default %lld does not fit)\n",
                                 static_cast<long long>(positions), static_cast<long long>(a.max_length));
    a.max_length = positions;
  }
  check_input(positions == 0 || a.max_length <= positions,
              "--max-length " + std::to_string(a.max_length) + " exceeds the model's " + std::to_string(positions) +
                  " positions (" + family.positions_key + " in its config.json)");
  Context c{tok, pad, run.started.device, a.batch_size, a.max_length, a.columns, family, config, a.checkpoint, run.leader, app,
            a.max_dev_examples};
  task.prepare_options(c);
  Prepared p = prepare_stoppable(task, c, a, run.group() == nullptr);
  int64_t per_epoch = 0;
  const auto finished = finished_keeping_best(a);
  // One rule for every finished run: --resume with changed flags is refused (--keep all's trainer checks them).
  if (finished) train::check_resumed_flags(a.output, resolved, 0, /*allow_changes=*/false);
  if (finished && run.leader) std::fprintf(stderr, "%s: finished earlier (--keep best): evaluating best/\n", a.output.c_str());
  const Json summary = finished ? *finished : train_task(a, run, c, task, p, resolved, per_epoch);
  if (finished) per_epoch = finished->value("steps_per_epoch", int64_t{0});
  if (!run.leader) return Json::object();
  auto best = models::load_pretrained(a.output + "/best");
  best->to(c.device);
  Json dev;
  try {
    StopSignals signals;
    dev = p.evaluate(*best, a.output + "/" + spec.predictions);
  } catch (const Interrupted& e) {
    throw Error(ExitCode::kInterrupted, std::string(e.what()) + " of the best checkpoint: training is finished; " +
                                            "the same command with --resume evaluates it and writes " + spec.predictions);
  }
  const Json result = best_result(a, task, dev, summary, per_epoch);
  drop_all_but_best(a);
  print_result(a, spec, task.describe(dev), result, summary);
  return result;
}

}  // namespace lmkit::tasks
