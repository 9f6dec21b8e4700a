// lmkit-pretrain: pretrain BERT (MLM + NSP), GPT (causal LM) or T5 (span
// corruption) from a preset and a corpus; writes checkpoints, metrics.jsonl and
// a final checkpoint a researcher can finetune, evaluate or load in Python.
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <optional>
#include <string>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/mixture.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/text_input.h"
#include "lmkit/data/tasks.h"
#include "lmkit/data/tokenizer_text.h"
#include "lmkit/dist/start.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/summary.h"
#include "lmkit/train/run.h"
#include "lmkit/train/trainer.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  TensorBoardFlags tensorboard;
  dist::GroupOptions dist;
  train::OptimizerFlags optimizer_flags;
  train::OptimizerOptions optimizer;  ///< from optimizer_flags, after parsing
  std::string model, init, train, valid, output, objective, tokenizer, schedule = "linear", dtype = "fp32";
  std::string source_lang, target_lang, text_field = "text";
  int64_t steps = 1000, batch_size = 32, seq_len = 128, warmup = -1, eval_every = 0, save_every = 0, keep_last = 2;
  int64_t stop_at = 0;
  int64_t accumulation = 1, log_every = 10, eval_batches = 0, vocab_size = 8000, prefetch = 2;
  double lr = 1e-4, weight_decay = 0.01, clip = 1.0, span_p = 0.2;
  int64_t max_span = 10;
  train::ParallelFlags parallel;  // --shard-optimizer, --bucket-mb, --overlap-param-gather
  bool resume = false, overwrite = false, whole_word = false, span_masking = false, allow_changes = false, new_head = false;
  bool recompute = false;
  bool document_mask = false, reset_positions = false;
  bool reset_positions_given = false;  // --reset-positions or --no-reset-positions, not its default
  bool seq_len_given = false;  // --seq-len on the command line or in --config, not its default
};

std::string side(const std::string& prefix, const std::string& lang) { return prefix + "." + lang; }

// "bert: mlm+nsp, mlm, mlm+sbo; gpt2: clm; ...", from the registries (plugins' entries included).
std::string objectives_by_family() {
  std::string text;
  for (const auto& f : models::families()) {
    std::vector<std::string> names;
    for (const auto& o : f.objectives) names.push_back(o.name);
    if (names.empty()) continue;  // a family that is only finetuned (vit)
    text += (text.empty() ? "" : "; ") + f.model_type + ": " + join_names(names);
  }
  return text;
}

// The tokenizer: given, from --init, or trained on the training text (by rank 0,
// whose files the other ranks then load) with the family's special tokens.
tokenizer::Tokenizer pretraining_tokenizer(const Args& a, const models::Family& family, bool seq2seq,
                                           dist::Group* group, std::string& tok_path) {
  const tokenizer::Family kind = tokenizer::parse_family(family.tokenizer_family);
  tok_path = a.tokenizer;
  if (tok_path.empty() && !a.init.empty() && tokenizer::Tokenizer::present(a.init)) tok_path = a.init;
  if (tok_path.empty()) tok_path = a.output + "/tokenizer.model";
  dist::leader_first(group, [&] {
    if (fs::exists(tok_path)) return;
    check_input(a.tokenizer.empty(), a.tokenizer + ": no such tokenizer model");
    tokenizer::TrainOptions t;
    t.inputs = seq2seq ? std::vector<std::string>{side(a.train, a.source_lang), side(a.train, a.target_lang)}
                       : std::vector<std::string>{a.train};
    if (const auto sources = data::parse_mixture(a.train); !sources.empty() && !seq2seq) {
      t.inputs.clear();  // a mixture's tokenizer learns from every source
      for (const auto& e : sources) t.inputs.push_back(e.path);
    }
    for (const auto& in : t.inputs) {
      check_input(!data::is_corpus(in), in + ": a corpus directory needs the --tokenizer it was encoded with");
      data::check_text_file(in);  // said here, not as SentencePiece's "Not found: ... Permission denied Error #13"
    }
    t.vocab_size = a.vocab_size;
    t.family = kind;
    t.output = tok_path;
    std::fprintf(stderr, "training a %lld-token %s tokenizer on %s\n", static_cast<long long>(a.vocab_size),
                 family.tokenizer_family.c_str(), a.train.c_str());
    data::train_tokenizer(t, data::TextFormat::kAuto, a.text_field);  // the texts as the corpus reads them
  });
  return tokenizer::Tokenizer::load(tok_path, kind);
}

// The model: a preset fitted to the tokenizer, or --init's checkpoint; its
// vocabulary and positions must fit the tokenizer and --seq-len.
std::shared_ptr<models::Model> pretraining_model(const Args& a, Json config, const std::string& config_name,
                                                 const models::Family& family, const models::Objective& objective,
                                                 const tokenizer::Tokenizer& tok) {
  // Presets carry the reference vocabularies; training takes the tokenizer's.
  if (a.init.empty()) family.fit_vocabulary(config, tok.vocab_size(), tok.specials().pad, tok.specials().eos);
  // A token-classifying objective's classes are the head's labels.
  const int64_t classes = data::objective(objective.name).num_classes;
  const Json labels = classes > 0 ? Json{{"num_labels", classes}} : Json::object();
  if (a.init.empty()) config.update(labels);
  auto model = a.init.empty() ? models::create_model(config, config_name, objective.architecture)
                              : models::load_pretrained(a.init, objective.architecture, nullptr, labels, a.new_head,
                                                      /*companions_required=*/true);
  const Json mc = model->config_json();
  const int64_t model_vocab = model->vocab_size();
  if (model_vocab != tok.vocab_size()) {
    throw InputError("vocabulary mismatch: the model has " + std::to_string(model_vocab) + " tokens, the tokenizer " +
                     std::to_string(tok.vocab_size()));
  }
  const int64_t longest = family.max_length(mc);
  if (longest > 0 && a.seq_len > longest) {
    const int64_t reserved = mc[family.positions_key].get<int64_t>() - longest;
    // "128 positions" read as the user's own number where --seq-len was not given: say it is the default.
    throw InputError("--seq-len " + std::to_string(a.seq_len) + (a.seq_len_given ? "" : " (its default)") + " exceeds the model's " +
                     family.positions_key + " (" +
                     mc[family.positions_key].dump() + ")" +
                     (reserved > 0 ? " less the " + std::to_string(reserved) + " positions it reserves" : ""));
  }
  return model;
}

// --document-mask and --reset-positions for this model, refused by name where it cannot take
// them; positions restart by default with the mask where the model has positions to restart.
data::PackingOptions packing_options(const Args& a, const models::Model& model) {
  data::PackingOptions p;
  p.document_mask = a.document_mask;
  check_input(!a.document_mask || model.takes_documents(),
              "--document-mask: " + model.architecture() + " cannot keep packed documents apart (" +
                  "its attention mixes positions: Longformer's windows, BigBird's blocks, Linformer's projections)");
  p.first_position = model.first_position();
  p.reset_positions = a.reset_positions_given ? a.reset_positions : a.document_mask && p.first_position >= 0;
  check_input(!p.reset_positions || p.first_position >= 0,
              "--reset-positions: " + model.architecture() + " takes no position ids (its positions are relative)");
  return p;
}

// What a run trains and validates on: one dataset each, or a mixture of named sources.
struct PretrainingData {
  std::shared_ptr<const data::Dataset> train, valid;
  std::vector<std::pair<std::string, std::shared_ptr<const data::Dataset>>> valid_sources;
};

// A loader epoch of a mixture: about 65,536 samples, a whole number of global batches.
int64_t mixture_period(const Args& a, dist::Group* group) {
  const int64_t global = a.batch_size * (group ? group->size() : 1);
  return global * ((65536 + global - 1) / global);
}

// The sources of --train or --valid: a mixture's, or one unnamed source (none for "").
std::vector<data::MixtureEntry> sources_of(const std::string& spec) {
  std::vector<data::MixtureEntry> entries = data::parse_mixture(spec);
  if (entries.empty() && !spec.empty()) entries.push_back({"", 1.0, spec});
  return entries;
}

// Every text checked before any is encoded: a --valid that cannot be read is said before --train's minutes,
// and a --text-field that no input has (JSONL or Parquet) is refused, not ignored.
void check_texts(const Args& a) {
  std::vector<std::string> files;
  for (const auto* spec : {&a.train, &a.valid}) {
    for (const auto& e : sources_of(*spec)) {
      if (data::is_corpus(e.path)) continue;
      for (auto& f : data::text_files(e.path)) files.push_back(std::move(f));
    }
  }
  data::check_text_field_used(files, a.text_field, "--text-field");
}

// Training and validation examples: parallel text (PREFIX.SRC / PREFIX.TGT, line by
// line) for parallel-text objectives, else the objective over a corpus or a weighted
// mixture of corpora (raw text is encoded once into the run's cache, by rank 0).
PretrainingData pretraining_data(const Args& a, const data::ObjectiveSpec& objective, const tokenizer::Tokenizer& tok,
                                 const models::Model& model, dist::Group* group) {
  data::check_objective_tokenizer(objective, tok);
  data::ObjectiveInputs in;
  in.packing = packing_options(a, model);
  in.tokenizer = &tok;
  in.seq_len = a.seq_len;
  in.masking.whole_word = a.whole_word;
  in.masking.spans = a.span_masking;
  in.masking.span_p = a.span_p;
  in.masking.max_span = a.max_span;
  // A fixed seed for validation: the same masks at every evaluation and in every run.
  auto make = [&](const std::string& path, std::shared_ptr<const data::Corpus> corpus, uint64_t seed) {
    data::ObjectiveInputs i = in;
    i.corpus = std::move(corpus);
    i.seed = seed;
    if (objective.parallel_text) i.source_file = side(path, a.source_lang), i.target_file = side(path, a.target_lang);
    return path.empty() ? nullptr : objective.dataset(i);
  };
  PretrainingData d;
  if (objective.parallel_text) {
    check_input(a.text_field == "text", "--text-field: parallel text (PREFIX.SRC, PREFIX.TGT) is read line by line, no fields");
    d.train = make(a.train, nullptr, a.runtime.seed);
    d.valid = make(a.valid, nullptr, 12345);
    return d;
  }
  check_texts(a);
  // Each source of --train / --valid (one path: one unnamed source), its corpus opened by rank 0 first.
  auto corpora = [&](const std::string& spec, const std::string& split) {
    std::vector<data::MixtureEntry> entries = sources_of(spec);
    const bool mixture = !data::parse_mixture(spec).empty();
    std::vector<std::pair<data::MixtureEntry, std::shared_ptr<const data::Corpus>>> out;
    dist::leader_first(group, [&] {
      for (const auto& e : entries) {
        out.emplace_back(e, data::open_corpus(e.path, tok, a.output + "/cache", mixture ? split + "-" + e.name : split,
                                              a.text_field));
      }
    });
    for (const auto& [e, corpus] : out) corpus->check_vocab(tok.vocab_size(), model.architecture());
    return std::make_pair(mixture, out);
  };
  const auto [train_mixture, train] = corpora(a.train, "train");
  if (train_mixture) {
    std::vector<data::MixtureSource> sources;
    for (const auto& [e, corpus] : train) sources.push_back({e.name, e.weight, make(e.path, corpus, a.runtime.seed)});
    d.train = std::make_shared<data::MixtureDataset>(std::move(sources), a.runtime.seed, mixture_period(a, group));
  } else {
    d.train = make(a.train, train.front().second, a.runtime.seed);
  }
  const auto [valid_mixture, valid] = corpora(a.valid, "valid");
  for (const auto& [e, corpus] : valid) {
    if (valid_mixture) d.valid_sources.emplace_back(e.name, make(e.path, corpus, 12345));
    else d.valid = make(a.valid, corpus, 12345);
  }
  return d;
}

// The tokenizer as the run records it: one trained into the run directory by its place
// there, so that a run directory moved elsewhere resumes (its path changed, not its tokenizer).
std::string own_tokenizer(const Args& a, const std::string& tok_path) {
  return tok_path == a.output + "/tokenizer.model" ? "OUTPUT/tokenizer.model" : tok_path;
}

train::TrainerOptions trainer_options(const Args& a, std::shared_ptr<dist::Group> group, bool accuracy) {
  train::TrainerOptions o;
  o.eval_accuracy = accuracy;
  o.steps = a.steps;
  o.accumulation = a.accumulation;
  o.clip = a.clip;
  o.optimizer = a.optimizer;
  o.parallel = a.parallel;
  o.schedule.schedule = train::parse_schedule(a.schedule);
  o.schedule.lr = a.lr;
  o.schedule.warmup = a.warmup >= 0 ? a.warmup : a.steps / 10;
  o.eval_every = a.eval_every;
  o.eval_batches = a.eval_batches;
  o.save_every = a.save_every;
  o.keep_last = a.keep_last;
  o.log_every = a.log_every;
  o.resume = a.resume;
  o.allow_changes = a.allow_changes;
  o.output = a.output;
  o.stop_at = a.stop_at;
  o.tensorboard = a.tensorboard.resolve(a.output);
  o.bf16 = a.dtype != "fp32";
  o.bf16_weights = a.dtype == "bf16-weights";
  o.recompute = a.recompute;
  o.group = std::move(group);
  return o;
}

// A figure of the summary with `decimals` places; a NaN (a diverged run's) as "nan", not "-nan".
std::string figure(double value, int decimals = 4) {
  if (std::isnan(value)) return "nan";
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// A mixture's sources: what training drew of each, and each one's validation loss.
void print_sources(const Json& summary) {
  if (summary.contains("train_sources")) {
    const char* separator = "\ndrawn: ";
    for (const auto& [name, d] : summary["train_sources"].items()) {
      std::printf("%s%s %lld samples (%.3g epochs)", separator, name.c_str(),
                  static_cast<long long>(d["samples"].get<int64_t>()), d["epochs"].get<double>());
      separator = ", ";
    }
  }
  if (summary.contains("valid") && summary["valid"].contains("sources")) {
    const char* separator = "\nvalid loss by source: ";
    for (const auto& [name, v] : summary["valid"]["sources"].items()) {
      std::printf("%s%s %s", separator, name.c_str(), figure(v["loss"].get<double>()).c_str());
      separator = ", ";
    }
  }
}

// `accuracy`: the objective labels tokens with classes (its figure is the accuracy, not a perplexity);
// an image objective's loss (MAE's pixel error) has no perplexity either.
void print_summary(const Args& a, const Json& summary, bool accuracy, bool images = false) {
  if (summary.value("already_finished", false)) {
    std::printf("the run already finished at step %lld: nothing to do\ncheckpoint: %s/final\n",
                static_cast<long long>(summary.value("steps", int64_t{0})), a.output.c_str());
    return;
  }
  if (summary.contains("stopped_at")) {
    std::printf("stopped after step %lld; continue with --resume\n", static_cast<long long>(summary["stopped_at"].get<int64_t>()));
    return;
  }
  std::printf("trained %lld steps in %.0f s", static_cast<long long>(a.steps), summary["elapsed_s"].get<double>());
  const int64_t skipped = summary.value("skipped_steps", int64_t{0});
  if (skipped > 0) std::printf(" (%lld skipped: a non-finite loss or gradient)", static_cast<long long>(skipped));
  std::printf(": train loss %s", figure(summary["train_loss"].get<double>()).c_str());
  if (summary.contains("valid")) {
    const Json& v = summary["valid"];
    // A loss of several terms (mlm + nsp) has no perplexity of its own: each term's is named after it.
    bool terms = false;
    for (auto it = v.begin(); it != v.end(); ++it) terms = terms || it.key().find("_perplexity") != std::string::npos;
    std::printf(", valid loss %s", figure(v["loss"].get<double>()).c_str());
    if (accuracy && v.contains("accuracy")) std::printf(", accuracy %s", figure(v["accuracy"].get<double>()).c_str());
    if (!accuracy && !terms && !images) std::printf(", perplexity %s", figure(v["perplexity"].get<double>(), 2).c_str());
    // The model's loss terms and metrics apart ("mlm_loss 2.31, mlm_perplexity 10.1, nsp_accuracy 0.62").
    std::string parts;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      if (key == "loss" || key == "perplexity" || key == "accuracy" || !it.value().is_number_float()) continue;
      parts += (parts.empty() ? "" : ", ") + key + " " + figure(it.value().get<double>());
    }
    if (!parts.empty()) std::printf(" (%s)", parts.c_str());
  }
  print_sources(summary);
  std::printf("\ncheckpoint: %s/final\n", a.output.c_str());
}

// How a run batches and trains.
struct Plan {
  data::LoaderOptions loader;
  train::TrainerOptions trainer;
};

// "N training examples per epoch", or a mixture's per source (its loader epoch, the interleaving's
// period, is no epoch of any source).
std::string examples_per_epoch(const data::Dataset& train) {
  const auto* mixture = dynamic_cast<const data::MixtureDataset*>(&train);
  if (!mixture) return std::to_string(train.size(0)) + " training examples per epoch";
  std::string line = "training examples per epoch of each source:";
  for (const auto& s : mixture->sources()) {
    char weight[32];
    std::snprintf(weight, sizeof weight, "%g", s.weight);
    line += (&s == &mixture->sources().front() ? " " : ", ") + s.name + " " + std::to_string(s.dataset->size(0)) +
            " (weight " + weight + ")";
  }
  return line;
}

// Records the run's config, trains `model` on `data` and prints the summary; `save_extra` adds
// the files a checkpoint carries beside the weights (the tokenizer, an image processor).
void train_and_report(const Args& a, const train::Run& run, Json run_config, std::shared_ptr<models::Model> model,
                      const PretrainingData& data, const Plan& plan, const std::string& objective,
                      std::function<void(const std::string&)> save_extra, bool accuracy, bool images = false) {
  run_config["objective"] = objective;
  run_config["warmup"] = plan.trainer.schedule.warmup;
  run_config["model_config"] = model->config_json();
  run_config["world_size"] = run.group() ? run.group()->size() : 1;  // each rank's share of a batch depends on it
  auto write_config = run.record_config(run_config, a.steps, a.allow_changes);
  if (run.leader) std::fprintf(stderr, "%s, %lld parameters, objective %s, %s\n", model->architecture().c_str(),
                               static_cast<long long>(models::count_parameters(*model)), objective.c_str(),
                               examples_per_epoch(*data.train).c_str());
  train::TrainerInputs in;
  in.model = std::move(model);
  in.train = data.train;
  in.loader = plan.loader;
  in.valid = data.valid;
  in.valid_sources = data.valid_sources;
  in.device = run.started.device;
  in.save_extra = std::move(save_extra);
  in.on_restored = std::move(write_config);
  train::Trainer trainer(std::move(in), plan.trainer);
  const Json summary = trainer.run();
  if (run.leader) print_summary(a, summary, accuracy, images);
}

// An image objective's data (MAE): IDX images at the model's size, the valid ones masked from a
// fixed seed; the patches a side come from the model's config.
PretrainingData image_data(const Args& a, const data::ObjectiveSpec& spec, const Json& mc) {
  const int64_t size = mc.value("image_size", int64_t{0}), patch = mc.value("patch_size", int64_t{1});
  auto make = [&](const std::string& path, uint64_t seed) -> std::shared_ptr<const data::Dataset> {
    if (path.empty()) return nullptr;
    auto images = data::read_model_images(path, mc, /*labels=*/false);
    data::ObjectiveInputs in;
    in.images = images;
    in.seq_len = (size / patch) * (size / patch);
    in.seed = seed;
    return spec.dataset(in);
  };
  PretrainingData d;
  d.train = make(a.train, a.runtime.seed);
  d.valid = make(a.valid, 12345);
  return d;
}

// lmkit-pretrain on images (--objective mae): no tokenizer; the checkpoints carry HF's
// preprocessor_config.json instead, the normalisation the pixels had.
void run_images(const Args& a, const Json& resolved, const train::Run& run, const Json& config, const std::string& config_name,
                const models::Objective& objective, const data::ObjectiveSpec& spec) {
  check_input(a.tokenizer.empty(), "--tokenizer: objective " + objective.name + " reads images, not text");
  check_input(a.text_field == "text", "--text-field: objective " + objective.name + " reads images, not text");
  check_input(!a.seq_len_given, "--seq-len: objective " + objective.name + " reads images (their patches are the sequence)");
  check_input(!data::is_corpus(a.train) && data::parse_mixture(a.train).empty(),
              "--train " + a.train + ": objective " + objective.name + " reads one IDX image file");
  auto model = a.init.empty() ? models::create_model(config, config_name, objective.architecture)
                              : models::load_pretrained(a.init, objective.architecture, nullptr, Json::object(), a.new_head);
  const Json mc = model->config_json();
  const PretrainingData data = image_data(a, spec, mc);
  data::LoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.seed = a.runtime.seed;
  lo.pad_id = 0;
  lo.prefetch = static_cast<int>(a.prefetch);
  const train::TrainerOptions o = trainer_options(a, run.started.group, false);
  const Json processor = data::ImageProcessor().to_json(mc.value("num_channels", int64_t{1}), mc.value("image_size", int64_t{0}),
                                                        mc.value("image_size", int64_t{0}));
  train_and_report(a, run, resolved, model, data, {lo, o}, objective.name,
                   [processor](const std::string& dir) { save_json_file(dir + "/preprocessor_config.json", processor); }, false,
                   /*images=*/true);
}

void run(const Args& a, const Json& resolved) {
  check_input(!a.model.empty() || !a.init.empty(), "give --model PRESET.json or --init CHECKPOINT");
  check_input(a.model.empty() || a.init.empty(), "--model and --init exclude each other");
  const train::Run run = train::open_run(a.runtime, a.dist, a.output, a.resume, a.overwrite);
  dist::Group* group = run.group();
  train::check_trainer_options(trainer_options(a, run.started.group, false));  // before the data
  const bool leader = run.leader;

  const std::string config_name = !a.init.empty() ? a.init + "/config.json" : a.model;
  const Json config = load_json_file(config_name);
  const models::Family& family = models::family_of_config(config, config_name);
  const models::Objective& objective = family.objective(a.objective);
  const data::ObjectiveSpec& spec = data::objective(objective.name);
  const bool seq2seq = spec.parallel_text;
  check_input(!seq2seq || (!a.source_lang.empty() && !a.target_lang.empty()),
              objective.name + " needs --source-lang and --target-lang (files PREFIX.SRC and PREFIX.TGT)");
  check_input(seq2seq || (a.source_lang.empty() && a.target_lang.empty()),
              "--source-lang and --target-lang apply to parallel-text objectives, not " + objective.name);
  // Said now, not after the tokenizer is trained and the corpus encoded.
  if (leader) a.tensorboard.check();
  data::PackingOptions asked;
  asked.document_mask = a.document_mask;
  asked.reset_positions = a.reset_positions;
  data::check_objective_packing(spec, asked);  // before the image branch too: mae packs no documents
  if (spec.images) return run_images(a, resolved, run, config, config_name, objective, spec);
  std::string tok_path;
  const auto tok = pretraining_tokenizer(a, family, seq2seq, group, tok_path);
  auto model = pretraining_model(a, config, config_name, family, objective, tok);
  const PretrainingData data = pretraining_data(a, spec, tok, *model, group);
  data::LoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.seed = a.runtime.seed;
  lo.pad_id = data::pad_id(tok);
  lo.prefetch = static_cast<int>(a.prefetch);
  lo.bucket_by_length = seq2seq;  // sentences vary in length: batch similar ones
  const train::TrainerOptions o = trainer_options(a, run.started.group, spec.num_classes > 0);
  // A signal that came while the model was built; under data parallelism the first step carries it to
  // every rank instead (one rank leaving alone would hang the others in the step's collectives).
  if (!group) check_stop("the run's preparation");

  Json run_config = resolved;
  run_config["tokenizer"] = own_tokenizer(a, tok_path);
  train_and_report(a, run, run_config, model, data, {lo, o}, objective.name, [&](const std::string& dir) { tok.save(dir); },
                   spec.num_classes > 0);
}

// run() under StopSignals: SIGTERM/SIGINT before the first step (a corpus being encoded) stop
// the run there, exit 3; from the first step on the trainer stops at a step and checkpoints.
void run_stoppable(const Args& a, const Json& resolved) {
  StopSignals signals;
  try {
    run(a, resolved);
  } catch (const Interrupted& e) {
    throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": training had not started, so there is nothing to " +
                                            "resume; the same command starts the run again");
  }
}

// The learning rate, its schedule and the optimizer (with every registered optimizer's flags).
void add_optimisation_flags(CLI::App& app, Args& a) {
  app.add_option("--lr", a.lr, "peak learning rate")->check(positive());
  app.add_option("--warmup", a.warmup, "warmup steps (default: 10% of --steps)")->check(non_negative());
  app.add_option("--schedule", a.schedule, "constant, linear, cosine or inverse-sqrt");
  app.add_option("--weight-decay", a.weight_decay, "decoupled weight decay (not on biases and norms)")->check(non_negative());
  a.optimizer_flags.eps = 1e-6;
  train::add_optimizer_flags(app, a.optimizer_flags);
  train::add_shard_flag(app, a.parallel);
}

// How the objectives mask tokens and keep packed documents apart.
void add_masking_flags(CLI::App& app, Args& a) {
  app.add_flag("--whole-word", a.whole_word, "whole-word masking (the masked-LM objectives)");
  app.add_flag("--span-masking", a.span_masking, "span masking of whole words (Joshi et al. 2020; mlm+sbo always uses it)");
  app.add_option("--span-p", a.span_p, "span masking: the geometric p of span lengths in words")->check(in_range(1e-6, 1.0));
  app.add_option("--max-span", a.max_span, "span masking: longest span in words")->check(in_range(1, 1000));
  app.add_flag("--document-mask", a.document_mask,
               "clm, mlm: each token of a packed block attends only within its own document, and no target crosses "
               "a boundary (Megatron-LM's reset_attention_mask; docs/data.md)");
  app.add_flag("--reset-positions,!--no-reset-positions", a.reset_positions,
               "clm, mlm: positions restart at each document of a packed block (default: on with --document-mask)")
      ->each([&a](const std::string&) { a.reset_positions_given = true; });
}

}  // namespace

int main(int argc, char** argv) {
  dist::quiet_follower_input_errors();  // a launched job's input errors said once, by rank 0
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-pretrain: pretrain a model with one of its family's objectives (" + objectives_by_family() +
               ") on a text file or token corpus");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  Args a;
  app.add_option("--model", a.model, "model preset JSON (one of models/)");
  app.add_option("--init", a.init, "continue pretraining from a checkpoint directory");
  app.add_option("--train", a.train,
                 "training text (a file, a directory of shards or a quoted pattern: 'data/*.jsonl.zst') or token corpus "
                 "directory, or a weighted mixture of them: NAME=WEIGHT:PATH,... (docs/data.md); mae: an IDX image file")
      ->required();
  app.add_option("--valid", a.valid, "validation text (file, directory or pattern) or token corpus directory, or a mixture as --train's");
  app.add_option("--text-field", a.text_field, "the JSONL field or Parquet column of --train's and --valid's texts")->check(non_empty());
  app.add_option("--output", a.output, "run directory")->required();
  app.add_option("--objective", a.objective, "the pretraining objective: " + objectives_by_family() +
                                                 "; default: the model type's first");
  app.add_option("--tokenizer", a.tokenizer,
                 "tokenizer directory, PATH.model or tokenizer.json (a checkpoint's, or lmkit-tokenize train's); "
                 "default: train one on --train");
  app.add_flag("--new-head", a.new_head, "with --init: start the pretraining head at random when the checkpoint has none (a finetuned classifier)");
  app.add_option("--source-lang", a.source_lang, "seq2seq: source suffix (--train PREFIX reads PREFIX.SRC)");
  app.add_option("--target-lang", a.target_lang, "seq2seq: target suffix (PREFIX.TGT)");
  app.add_option("--vocab-size", a.vocab_size, "vocabulary of a tokenizer trained here")->check(in_range(128, 1 << 20));
  app.add_option("--steps", a.steps, "optimizer steps")->check(positive());
  app.add_option("--batch-size", a.batch_size, "sequences per batch")->check(positive());
  app.add_option("--seq-len", a.seq_len, "tokens per sequence (an encoder-decoder's: its input length)")->check(in_range(8, 1 << 16))
      ->each([&a](const std::string&) { a.seq_len_given = true; });
  add_optimisation_flags(app, a);
  app.add_option("--clip", a.clip, "gradient-norm clip (0: off)")->check(non_negative());
  app.add_option("--accumulation", a.accumulation, "batches per optimizer step")->check(positive());
  app.add_option("--eval-every", a.eval_every, "validate every N steps (0: at the end)")->check(non_negative());
  app.add_option("--eval-batches", a.eval_batches, "validation batches (0: all)")->check(non_negative());
  app.add_option("--save-every", a.save_every, "checkpoint every N steps (0: at the end)")->check(non_negative());
  app.add_option("--keep-last", a.keep_last, "step checkpoints kept")->check(positive());
  app.add_option("--log-every", a.log_every, "train lines in metrics.jsonl every N steps")->check(positive());
  app.add_option("--prefetch", a.prefetch, "batches prepared ahead by a background thread")->check(non_negative());
  add_masking_flags(app, a);
  app.add_option("--dtype", a.dtype,
                 "fp32; bf16 (autocast, float32 weights); or bf16-weights (bf16 weights in the step, float32 masters)")
      ->check(CLI::IsMember({"fp32", "bf16", "bf16-weights"}));
  app.add_flag("--recompute", a.recompute,
               "recompute each layer's activations in backward instead of keeping them (less memory, about a third "
               "more compute; the same gradients, dropout masks replayed)");
  app.add_flag("--resume", a.resume, "continue from OUTPUT/checkpoints/latest");
  app.add_flag("--overwrite", a.overwrite, "replace the earlier run in OUTPUT (its checkpoints, metrics and results)");
  app.add_flag("--allow-changes", a.allow_changes, "with --resume: continue although flags differ from the run's config.json");
  app.add_option("--stop-at", a.stop_at, "stop after step N as if interrupted (checkpoint kept; continue with --resume)")->check(non_negative());
  add_runtime_flags(app, a.runtime);
  add_tensorboard_flags(app, a.tensorboard);
  dist::add_distributed_flags(app, a.dist);
  add_config_flag(app);
  return run_app(app, argc, argv, [&] {
    a.optimizer = train::optimizer_options(app, a.optimizer_flags, a.lr, a.weight_decay);
    run_stoppable(a, resolved_options(app));
  });
}
