#include "lmkit/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/archive.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/recompute.h"
#include "lmkit/core/stop.h"
#include "lmkit/core/tensorboard.h"
#include "lmkit/eval/loss.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/train/sharded.h"
#include "lmkit/io/checkpoint.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/generators.h"
#include "lmkit/train/step.h"

namespace fs = std::filesystem;

namespace lmkit::train {

namespace {

// Keeps metrics.jsonl lines up to `step`: a resumed run rewrites what the killed one logged after its checkpoint.
void truncate_metrics(const std::string& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      if (Json::parse(line).value("step", int64_t{0}) <= step) kept += line + "\n";
    } catch (const std::exception&) {
      break;  // a torn last line from a killed process
    }
  }
  write_file_atomic(path, kept);
}

}  // namespace

namespace {

// What lmkit-pretrain and lmkit-finetune write in a run directory (and nothing else).
bool run_output(const std::string& name) {
  static const std::set<std::string> names = {".lock",       "config.json", "metrics.jsonl", "result.json",
                                              "checkpoints", "final",       "best",          "cache",
                                              // a tokenizer trained in the run: tokenizer.model and HF's files beside it
                                              "tokenizer_config.json", "special_tokens_map.json"};
  return names.count(name) || name.rfind("tokenizer.", 0) == 0 || name.rfind("events.out.tfevents.", 0) == 0 ||
         name.find(".tmp.") != std::string::npos || name.find(".old.") != std::string::npos;
}

}  // namespace

std::unique_ptr<RunLock> open_run_directory(const std::string& dir, bool resume, bool overwrite,
                                            const std::vector<std::string>& also_ours) {
  check_input(!(resume && overwrite), "--resume and --overwrite exclude each other");
  std::error_code ec;
  const bool created = !fs::exists(dir, ec);
  make_output_directory(dir);  // names what is in the way when it cannot be a writable directory
  const bool earlier_run = fs::exists(dir + "/.lock", ec);
  std::vector<std::string> ours, foreign;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool own = run_output(name) || std::find(also_ours.begin(), also_ours.end(), name) != also_ours.end();
    (earlier_run && own ? ours : foreign).push_back(name);
  }
  auto list = [](std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    return first_names(names, 4);
  };
  if (!foreign.empty()) {
    throw InputError("--output " + dir + ": holds files lmkit did not write (" + list(foreign) +
                     "); choose a new or empty directory");
  }
  auto lock = std::make_unique<RunLock>(dir, created);  // a run still going there is named, before anything is removed
  const bool used = std::any_of(ours.begin(), ours.end(), [](const std::string& n) { return n != ".lock"; });
  // config.json is written when training starts (Run::record_config): without it, or anything a
  // step writes, the earlier run stopped before training (bad input), and the tokenizer and cache
  // it made are no run to keep: the next run there starts without --overwrite.
  static const std::set<std::string> training = {"config.json", "metrics.jsonl", "result.json", "checkpoints", "final", "best"};
  const bool trained = std::any_of(ours.begin(), ours.end(), [](const std::string& n) { return training.count(n) > 0; });
  if (!used || (resume && trained)) return lock;
  if (!overwrite && trained) {
    throw InputError("--output " + dir + ": holds an earlier run (" + list(ours) +
                     "); give --resume to continue it, --overwrite to replace it, or a new --output");
  }
  for (const auto& name : ours) {
    if (name == ".lock") continue;
    fs::remove_all(dir + "/" + name, ec);
    if (ec) throw RuntimeError(dir + "/" + name + ": cannot remove the earlier run's output (" + ec.message() + ")");
  }
  return lock;
}

void check_trainer_options(const TrainerOptions& o) {
  check_input(o.steps >= 1, "--steps must be >= 1");
  check_input(o.accumulation >= 1, "--accumulation must be >= 1");
  check_parallel_flags(o.parallel, o.optimizer.name, o.group != nullptr);
}

void check_resumed_flags(const std::string& output, const Json& now, int64_t steps, bool allow_changes) {
  const std::string latest = train::latest_checkpoint(output);
  if (!latest.empty()) {
    const int64_t reached = train::checkpoint_step(latest);
    check_input(steps >= reached, "--steps " + std::to_string(steps) + " is below the step the run has reached (" +
                                      std::to_string(reached) + ")");
  }
  const std::string path = output + "/config.json";
  if (!fs::exists(path)) return;
  const Json before = load_json_file(path);
  // The checkpoints hold the optimizer's own state: another optimizer cannot continue from it.
  const Json was = before.value("optimizer", Json()), is = now.value("optimizer", Json());
  if (was.is_string() && is.is_string() && was != is) {
    throw InputError("--resume with --optimizer " + is.get<std::string>() + ": the run trains with --optimizer " +
                     was.get<std::string>() + ", whose state its checkpoints hold (--allow-changes cannot change it); "
                     "to go on with another, start a new run from its weights, " +
                     (latest.empty() ? output + "/final" : latest) + " (lmkit-pretrain --init, lmkit-finetune --checkpoint)");
  }
  static const std::set<std::string> may_change = {"resume", "stop-at", "eval-every", "eval-batches", "save-every",
                                                   "keep-last", "log-every", "prefetch", "threads", "device", "deterministic",
                                                   "backend", "dist-timeout", "allow-changes", "output", "overwrite",
                                                   "tensorboard", "no-tensorboard", "plugin",
                                                   // the same weights bit for bit either way (distributed: zero)
                                                   "overlap-param-gather", "no-overlap-param-gather"};
  std::string changed;
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (may_change.count(it.key()) || !before.contains(it.key()) || before[it.key()] == it.value()) continue;
    changed += (changed.empty() ? "" : ", ") + ("--" + it.key() + " " + brief_json(it.value()) + " (was " +
                                                 brief_json(before[it.key()]) + ")");
  }
  if (changed.empty()) return;
  if (!allow_changes) {
    throw InputError("--resume with flags that differ from " + path + ": " + changed +
                     "; give the run's flags, or --allow-changes to continue anyway");
  }
  std::fprintf(stderr, "resuming with changed flags (--allow-changes): %s\n", changed.c_str());
}

bool CheckpointDir::complete(const std::string& dir) {
  for (const char* f : {"config.json", "model.safetensors", "trainer_state.json", "optimizer.pt"}) {
    if (!fs::exists(dir + "/" + f)) return false;
  }
  return true;
}

std::string CheckpointDir::latest() const {
  const std::string latest = dir_ + "/latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_file(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (!std::regex_match(name, std::regex("step-[0-9]+"))) {
    throw InputError(latest + ": corrupt (expected a checkpoint name like step-100, got '" + name.substr(0, 40) + "')");
  }
  const std::string dir = dir_ + "/" + name;
  if (!complete(dir)) throw InputError(latest + ": names " + name + ", which is missing or incomplete");
  return dir;
}

void CheckpointDir::save(int64_t step, const std::function<void(const std::string&)>& write) const {
  write(step_path(step));
  write_file_atomic(dir_ + "/latest", "step-" + std::to_string(step) + "\n");
}

void CheckpointDir::rotate(int64_t keep) const {
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (auto& e : fs::directory_iterator(dir_)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, std::regex("step-([0-9]+)"))) steps.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(keep, 1)) < steps.size(); ++i) fs::remove_all(steps[i].second);
}

std::string latest_checkpoint(const std::string& run_dir) { return CheckpointDir(run_dir).latest(); }

int64_t checkpoint_step(const std::string& dir) {
  const std::string file = dir + "/trainer_state.json";
  const Json state = load_json_file(file);
  if (!state.is_object() || !state.contains("step") || !state["step"].is_number_integer() || state["step"].get<int64_t>() < 0) {
    throw InputError(file + ": damaged (no non-negative integer 'step')");
  }
  return state["step"].get<int64_t>();
}

Trainer::Trainer(TrainerInputs in, TrainerOptions options)
    : model_(std::move(in.model)), o_(std::move(options)), train_(std::move(in.train)), valid_(std::move(in.valid)),
      valid_sources_(std::move(in.valid_sources)), train_loader_(in.loader), valid_loader_(in.valid_loader.value_or(in.loader)), device_(in.device),
      save_extra_(std::move(in.save_extra)), on_restored_(std::move(in.on_restored)) {
  check_input(model_ != nullptr && train_ != nullptr, "the trainer needs a model and training examples");
  check_trainer_options(o_);
  check_input(!o_.output.empty(), "--output is required");
  std::error_code ec;  // rank 0 writes the run, and holds its lock
  check_input(!writer() || std::filesystem::exists(o_.output + "/.lock", ec),
              o_.output + " is not open for a run: open it with train::open_run_directory and hold its lock while the "
                          "trainer runs");
  if ((o_.bf16 || o_.bf16_weights) && device_.is_cpu() && !cpu_has_bf16() && writer()) {
    std::fprintf(stderr, "warning: --dtype %s on a CPU without avx512_bf16 or AMX: its bf16 matrix products are emulated, "
                         "several times slower than --dtype fp32 (18x on an AVX2 CPU; docs/benchmarks.md)\n",
                 o_.bf16_weights ? "bf16-weights" : "bf16");
  }
  o_.schedule.total_steps = o_.steps;
  model_->to(device_);
  OptimizerOptions optimizer = o_.optimizer;
  optimizer.lr = o_.schedule.lr;
  if (o_.group) {
    // One model on every rank: rank 0's initial weights (a resumed run then loads its checkpoint everywhere).
    std::vector<at::Tensor> state = model_->parameters();
    for (const auto& b : model_->buffers()) state.push_back(b);
    dist::broadcast_module(*o_.group, state);
    const double mib = o_.parallel.bucket_mb > 0 ? o_.parallel.bucket_mb : 25.0;
    reducer_ = std::make_unique<dist::GradientReducer>(o_.group, model_->parameters(),
                                                       static_cast<int64_t>(mib * (1 << 20)), o_.parallel.shard_optimizer);
  }
  if (o_.parallel.shard_optimizer > 0) {
    auto sharded = std::make_unique<ShardedOptimizer>(*reducer_, model_parameters(*model_), optimizer);
    if (o_.parallel.overlap_param_gather) sharded->overlap_gather(nn::gated_layers(*model_));
    optimizer_ = std::move(sharded);
  } else {
    optimizer_ = make_optimizer(*model_, std::move(optimizer));
  }
  train_loader_ = data::sharded(train_loader_, o_.group.get());
  // Once, before any batch: NSP's and a mixture's per-epoch plans are cached one epoch at a time,
  // so epoch 0's examples read at each checkpoint of a later epoch would rebuild two plans there.
  train_fingerprint_ = data::fingerprint(*train_);
}

void Trainer::save_checkpoint(int64_t step, const data::LoaderPosition& position, const std::string& dir,
                              const GeneratorStates& generators, bool optimizer) {
  // The parameters are whole: generators(), which every rank calls first, settled the all-gather.
  Json state = {{"step", step},
                {"epoch", position.epoch},
                {"batch", position.batch},
                {"best_valid", std::isfinite(best_valid_) ? Json(best_valid_) : Json(nullptr)},
                {"best_metric", o_.best_metric},
                {"best_step", best_step_},
                {"evals_since_best", evals_since_best_},
                {"skipped_steps", skipped_steps_},
                {"train_data", train_fingerprint_},
                {"schedule", schedule_name(o_.schedule.schedule)},
                {"lr", learning_rate(o_.schedule, std::max<int64_t>(step, 1))},
                {"generators", {{"device", generators.device_type}, {"ranks", generators.ranks()}}}};
  if (validation_pending_) state["validation_pending"] = true;
  models::save_pretrained(*model_, dir, [&](const std::string& tmp) {
    save_json_file(tmp + "/trainer_state.json", state);
    if (save_extra_) save_extra_(tmp);
    if (!optimizer) return;
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    // The generators dropout draws from (every rank's; on CUDA the device's too): a resumed run
    // draws the same masks an uninterrupted one would. cpu_rng_state is rank 0's, as earlier
    // checkpoints hold it.
    archive.write("cpu_rng_state", generators.cpu[0]);
    archive.write("cpu_rng_states", generators.cpu);
    if (generators.device.defined()) archive.write("cuda_rng_states", generators.device);
    // Serialised in memory, then written by lmkit's checked writer: LibTorch's file writer
    // threw from a destructor on a full disk (std::terminate, the temporary folder left behind).
    std::ostringstream bytes;
    archive.save_to(bytes);
    write_file_atomic(tmp + "/optimizer.pt", bytes.str());
  });
}

GeneratorStates Trainer::generators() const {
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(optimizer_.get())) sharded->gather();
  return capture_generators(device_, o_.group.get());
}

data::LoaderPosition Trainer::restore(const std::string& dir) {
  const std::string weights = dir + "/model.safetensors";
  models::load_hf_weights(*model_, io::read_safetensors(weights), weights, /*strict=*/true);
  // Companions (a model trained beside this one) resume with it: a checkpoint without one is incomplete.
  const auto read = models::load_companions(*model_, dir);
  for (const auto& [folder, companion] : model_->companions()) {
    check_input(std::find(read.begin(), read.end(), folder) != read.end(),
                dir + ": no " + folder + "/model.safetensors (the " + companion->architecture() + " trained beside the model)");
  }
  // A damaged file is the user's to fix (exit 2), named, not LibTorch's or nlohmann's raw message (exit 1).
  torch::serialize::InputArchive archive;
  GeneratorStates generators;
  try {
    archive.load_from(dir + "/optimizer.pt");
    optimizer_->load(archive);
    at::Tensor rng;
    // Checkpoints before exact resume on CUDA hold rank 0's CPU generator alone.
    const bool all_ranks = archive.try_read("cpu_rng_states", generators.cpu), rank0 = archive.try_read("cpu_rng_state", rng);
    check_input(all_ranks || rank0, dir + "/optimizer.pt: holds no CPU generator state (neither cpu_rng_states nor "
                                          "cpu_rng_state): damaged, or not an optimizer state lmkit wrote");
    if (!all_ranks) generators.cpu = rng.unsqueeze(0);
    archive.try_read("cuda_rng_states", generators.device);  // CPU runs saved none: it stays undefined
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw InputError(dir + "/optimizer.pt: damaged or not this run's optimizer state (" + what.substr(0, what.find('\n')).substr(0, 160) + ")");
  }
  const std::string state_file = dir + "/trainer_state.json";
  const Json state = load_json_file(state_file);
  try {
    if (state.contains("generators")) generators.device_type = state["generators"].at("device").get<std::string>();
    check_input(generators.cpu.dim() == 2 && generators.cpu.scalar_type() == at::kByte &&
                    (!generators.device.defined() || generators.device.size(0) == generators.cpu.size(0)),
                dir + "/optimizer.pt: damaged generator states");
    const int64_t rank = o_.group ? o_.group->rank() : 0, ranks = o_.group ? o_.group->size() : 1;
    std::optional<std::string> warning;
    try {
      warning = restore_generators(generators, device_, rank, ranks);
    } catch (const c10::Error& e) {
      throw InputError(dir + "/optimizer.pt: damaged generator states (" + std::string(e.what_without_backtrace()).substr(0, 120) + ")");
    }
    if (warning && writer()) std::fprintf(stderr, "%s\n", warning->c_str());
    start_step_ = state.at("step").get<int64_t>();
    check_same_data(state.value("train_data", std::string()), state_file);
    skipped_steps_ = state.value("skipped_steps", int64_t{0});
    if (state.contains("best_valid") && state["best_valid"].is_number()) best_valid_ = state["best_valid"].get<double>();
    // Early stopping and result.json carry on from where the run was, not from zero.
    best_step_ = state.value("best_step", int64_t{0});
    evals_since_best_ = state.value("evals_since_best", int64_t{0});
    validation_pending_ = state.value("validation_pending", false);
    const data::LoaderPosition position{state.at("epoch").get<int64_t>(), state.at("batch").get<int64_t>()};
    check_input(start_step_ >= 0 && position.epoch >= 0 && position.batch >= 0, state_file + ": negative step or position");
    return position;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(state_file + ": damaged (" + std::string(e.what()).substr(0, 160) + ")");
  }
}

void Trainer::check_same_data(const std::string& saved, const std::string& state_file) const {
  // The data cache is keyed by a file's path, size and date: text replaced or edited since the run
  // began resumed silently on other examples, the loader's position applied to them.
  if (saved.empty()) return;  // a checkpoint from before the fingerprint
  const std::string& now = train_fingerprint_;
  if (saved == now) return;
  auto count = [](const std::string& f) { return f.substr(0, f.find(':')); };
  const std::string what = "the training examples differ from the run's (" +
                           (count(saved) == count(now) ? "the same count, " + count(now) + ", other contents"
                                                       : count(now) + " examples, the run had " + count(saved)) +
                           "; " + state_file + " records " + saved + ", they give " + now + ")";
  if (!o_.allow_changes) {
    throw InputError("--resume: " + what + ": give the run's data (lmkit-pretrain's --allow-changes continues on these, "
                     "not as an uninterrupted run would)");
  }
  if (writer()) std::fprintf(stderr, "warning: resuming with changed data (--allow-changes): %s\n", what.c_str());
}

void Trainer::parameters_ready() const {
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(optimizer_.get())) sharded->settle();
}

Json Trainer::validate(int64_t step) {
  parameters_ready();
  // A custom evaluator runs whole on every rank (the same figures everywhere, so every
  // rank takes the same early-stopping decision); the loss is evaluated in shares.
  const int64_t max_batches = o_.group ? (o_.eval_batches + o_.group->size() - 1) / o_.group->size() : o_.eval_batches;
  Json r = o_.evaluator             ? o_.evaluator(*model_)
           : !valid_sources_.empty() ? validate_sources(max_batches)
                                     : eval::evaluate_loss(*model_, valid_, valid_loader_, device_, max_batches, o_.group.get(),
                                                           o_.eval_accuracy);
  r["step"] = step;
  r["split"] = "valid";
  return r;
}

Json Trainer::validate_sources(int64_t max_batches) {
  Json sources = Json::object();
  for (const auto& [name, dataset] : valid_sources_) {
    sources[name] = eval::evaluate_loss(*model_, dataset, valid_loader_, device_, max_batches, o_.group.get(), o_.eval_accuracy);
  }
  // Every figure pooled over the sources, weighted by their targets: counts summed, perplexities
  // as the weighted geometric mean (exp of the pooled loss they stand for), the rest as the weighted mean.
  Json pooled = Json::object();
  double total = 0;
  for (const auto& [name, s] : sources.items()) total += s.value("targets", 0.0);
  for (const auto& [key, first] : sources.begin()->items()) {
    if (!first.is_number()) continue;
    const bool count = key == "targets" || key == "tokens" || key == "batches";
    const bool perplexity = key.find("perplexity") != std::string::npos;
    double sum = 0;
    for (const auto& [name, s] : sources.items()) {
      const double v = s.value(key, 0.0), weight = count ? 1.0 : s.value("targets", 0.0) / std::max(total, 1.0);
      sum += weight * (perplexity ? std::log(v) : v);
    }
    pooled[key] = perplexity ? std::exp(sum) : sum;
    if (count) pooled[key] = static_cast<int64_t>(std::llround(sum));
  }
  pooled["sources"] = std::move(sources);
  return pooled;
}

struct Trainer::Loop {
  Loop(const Trainer& t, data::LoaderPosition position)
      : loader(t.train_, t.train_loader_, position),
        bar(t.o_.steps, "train", t.writer() ? nullptr : &quiet, t.writer() ? -1 : 0),
        checkpoints(t.o_.output),
        step(t.start_step_) {
    bar.started_at = step;  // a resumed run's rate and ETA from the steps it runs
  }

  std::ostringstream quiet;  // ranks other than 0 draw no progress bar
  data::Loader loader;
  ProgressBar bar;
  CheckpointDir checkpoints;
  std::optional<MetricsWriter> metrics;
  std::optional<tensorboard::EventWriter> events;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), window_start = start;
  int64_t step, window_tokens = 0, window_images = 0, bad_in_row = 0;
  double last_loss = NAN;
  Json last_valid;
  bool interrupted = false;

  // TensorBoard: one event file, rewritten from metrics.jsonl (already cut to the resumed
  // step) and the run's config, so that a resumed run shows one curve with no step twice.
  void open_events(const std::string& dir, const std::string& run_dir) {
    tensorboard::remove_event_files(dir);
    events.emplace(dir);
    const double t = tensorboard::now();
    if (fs::exists(run_dir + "/config.json")) {
      events->text("config", "```\n" + load_json_file(run_dir + "/config.json").dump(2) + "\n```", 0, t);
    }
    std::ifstream in(metrics->path());
    for (std::string line; std::getline(in, line);) events->record(Json::parse(line), t);
  }
  // One metrics.jsonl record, and its scalars in TensorBoard. A TensorBoard file that can no
  // longer be written (its disk or quota full) ends the events, not the run: metrics.jsonl holds
  // every record, and a resumed run rewrites the event file from it.
  void log(const Json& line) {
    metrics->write(line);
    if (!events) return;
    try {
      events->record(line, tensorboard::now());
    } catch (const Error& e) {
      bar.message(std::string("warning: ") + e.what() + "; no more TensorBoard events in this run (training goes on; "
                  "metrics.jsonl has every record, and --resume rewrites the event file from it)");
      events.reset();
    }
  }
};

Json Trainer::run() {
  if (writer()) fs::create_directories(CheckpointDir(o_.output).path());
  const data::LoaderPosition position = resume();
  if (auto summary = finished_summary()) return *summary;
  if (writer()) truncate_metrics(o_.output + "/metrics.jsonl", start_step_);
  set_follower_quiet(false);  // from here each rank's batches are its own: each says its errors
  Loop loop(*this, position);
  if (writer()) loop.metrics.emplace(o_.output + "/metrics.jsonl");
  if (writer() && !o_.tensorboard.empty()) loop.open_events(o_.tensorboard, o_.output);
  model_->to(device_);
  model_->train();
  // Under data parallelism every parameter a recomputed layer uses must reach the reducer's hooks.
  const nn::RecomputeScope recompute(o_.recompute, /*parameters_listed=*/o_.group != nullptr);
  loop.bar.update(start_step_);
  const int64_t stop = o_.stop_at > 0 ? std::min(o_.stop_at, o_.steps) : o_.steps;
  StopSignals signals;
  if (validation_pending_) early_stopped_ = validate_pending(loop);
  while (loop.step < stop && !loop.interrupted && !early_stopped_) {
    // A skipped step (non-finite) still reaches its validation and checkpoint: skipping them too
    // left a finetuning run whose epoch ended on one without the dev figures or best/ it reports.
    train_one(loop);
    const auto pause = std::chrono::steady_clock::now();
    const bool stop_early = validate_or_defer(loop);
    if (!validation_pending_) save_step(loop);
    // Validation and checkpoints are not training: the throughput window (tok/s) leaves their time out.
    loop.window_start += std::chrono::steady_clock::now() - pause;
    early_stopped_ = stop_early;
  }
  parameters_ready();
  loop.bar.finish();
  if (o_.group) report_memory();
  if ((loop.step < o_.steps || validation_pending_) && !early_stopped_) return stop_interrupted(loop);
  return finish(loop);
}

void Trainer::report_memory() const {
  int64_t held = 0, total = 0;
  for (const auto& p : model_->parameters()) total += p.requires_grad() ? p.numel() : 0;
  auto* sharded = dynamic_cast<ShardedOptimizer*>(optimizer_.get());
  held = sharded ? sharded->piece_elements() : total;
  // The gradient buckets' whole buffers: stage 2 holds two at a time in backward, the others every one.
  std::fprintf(stderr, "rank %lld of %lld: optimizer state of %lld of %lld parameter elements, %lld bytes (%s); "
               "peak resident memory %.1f MiB; gradient buckets: at most %lld of %lld bytes held at once\n",
               static_cast<long long>(o_.group->rank()), static_cast<long long>(o_.group->size()),
               static_cast<long long>(held), static_cast<long long>(total),
               static_cast<long long>(optimizer_state_bytes(*optimizer_)),
               o_.parallel.shard_optimizer ? ("stage " + std::to_string(o_.parallel.shard_optimizer)).c_str() : "unsharded", peak_rss_mib(),
               static_cast<long long>(reducer_ ? reducer_->peak_bucket_bytes() : 0),
               static_cast<long long>(reducer_ ? reducer_->bucket_bytes() : 0));
  if (sharded && sharded->overlapping() && sharded->buckets_gathered() > 0) {
    // The rest were waited for before the forward: they hold a parameter outside the layers (embeddings, heads).
    std::fprintf(stderr, "rank %lld: parameter all-gather overlapped with the forward: %lld of %lld buckets waited for "
                 "by their layers in the last step\n", static_cast<long long>(o_.group->rank()),
                 static_cast<long long>(sharded->buckets_awaited_by_layers()),
                 static_cast<long long>(sharded->buckets_gathered()));
  }
}

bool Trainer::validate_or_defer(Loop& loop) {
  // Data-parallel ranks validate together (a rank leaving a collective would hang the
  // others): they notice a signal at the next step, which carries it to every rank.
  std::optional<NoStopChecks> together;
  if (o_.group) together.emplace();
  try {
    return validate_and_keep_best(loop);
  } catch (const Interrupted&) {
    validation_pending_ = true;  // in the step's checkpoint: the resumed run validates first
    loop.interrupted = true;
    return false;
  }
}

bool Trainer::validate_pending(Loop& loop) {
  if (writer()) std::fprintf(stderr, "validating step %lld first (a stop signal interrupted it)\n", static_cast<long long>(loop.step));
  validation_pending_ = false;
  const bool stop_early = validate_or_defer(loop);
  if (!validation_pending_) {
    const GeneratorStates states = generators();  // every rank: a collective under data parallelism
    // The step's checkpoint again, now without the pending validation, so that it is never repeated.
    const data::LoaderPosition position = loop.loader.position();
    if (writer()) loop.checkpoints.save(loop.step, [&](const std::string& dir) { save_checkpoint(loop.step, position, dir, states); });
  }
  return stop_early;
}

data::LoaderPosition Trainer::resume() {
  data::LoaderPosition position;
  const std::string latest = o_.resume ? latest_checkpoint(o_.output) : "";
  if (!latest.empty()) {
    position = restore(latest);
    if (writer()) std::fprintf(stderr, "resuming from %s (step %lld)\n", latest.c_str(), static_cast<long long>(start_step_));
  }
  if (on_restored_ && writer()) on_restored_();
  if (o_.group) {
    // Every rank must continue from rank 0's checkpoint: the run directory has to be one all ranks see.
    std::vector<double> mine(static_cast<size_t>(o_.group->size()), 0.0);
    mine[static_cast<size_t>(o_.group->rank())] = static_cast<double>(start_step_);
    const auto steps = o_.group->sum(mine, device_);  // every rank's start step
    for (size_t r = 1; r < steps.size(); ++r) {
      if (steps[r] != steps[0]) {
        throw InputError("rank " + std::to_string(r) + " would resume from step " + std::to_string(static_cast<int64_t>(steps[r])) +
                         " but rank 0 from step " + std::to_string(static_cast<int64_t>(steps[0])) + ": --output " + o_.output +
                         " must be a directory every rank sees (a shared filesystem)");
      }
    }
  }
  if (start_step_ > o_.steps) {
    throw InputError("--steps " + std::to_string(o_.steps) + " is below the step the run has reached (" +
                     std::to_string(start_step_) + ")");
  }
  return position;
}

std::optional<Json> Trainer::finished_summary() const {
  if (start_step_ != o_.steps || !fs::exists(o_.output + "/result.json") || !fs::exists(o_.output + "/final")) return {};
  // Resuming a finished run changes nothing (it used to rewrite result.json without its figures).
  Json summary = load_json_file(o_.output + "/result.json");
  summary["already_finished"] = true;
  if (o_.group) o_.group->barrier();
  return summary;
}

void Trainer::train_one(Loop& loop) {
  const double lr = learning_rate(o_.schedule, loop.step + 1);
  set_learning_rate(*optimizer_, lr);
  std::vector<Batch> batches;
  for (int64_t micro = 0; micro < o_.accumulation; ++micro) {
    batches.push_back(loop.loader.next().to(device_));
    if (o_.accumulate_within_epoch && loop.loader.position().batch == 0) break;  // the epoch's last step
  }
  const Precision precision = o_.bf16_weights ? Precision::kBf16Weights : o_.bf16 ? Precision::kBf16 : Precision::kFp32;
  const StepResult result =
      train_step(*model_, *optimizer_, batches, o_.clip, precision, reducer_.get(), false, StopSignals::received() != 0);
  loop.window_tokens += result.tokens;
  loop.window_images += result.images;
  ++loop.step;
  loop.interrupted = result.stop;  // the same on every rank: they all stop after this step
  if (!result.finite) {
    // Skip the update; the data moves on. Too many in a row means training has diverged.
    if (skipped_steps_++ == 0 && writer()) {
      loop.bar.message("warning: step " + std::to_string(loop.step) + ": the loss (" + fmt(result.loss) +
                       ") or the gradient norm (" + fmt(result.grad_norm) + ") is not finite; the update is skipped "
                       "(every skip is counted in the summary; " + std::to_string(o_.max_bad_steps) +
                       " in a row stop the run)");
    }
    if (++loop.bad_in_row >= o_.max_bad_steps) {
      // Every rank counts the same steps (the reducer agrees on `finite`): rank 0's line says why.
      if (!writer()) throw FollowerStop(ExitCode::kRuntime);
      const std::string latest = loop.checkpoints.latest();
      throw RuntimeError("stopping at step " + std::to_string(loop.step) + ": " + std::to_string(loop.bad_in_row) +
                         " consecutive steps had a non-finite loss or gradient" +
                         (latest.empty() ? "" : "; the last good checkpoint is " + latest));
    }
    return;
  }
  loop.bad_in_row = 0;
  loop.last_loss = result.loss;
  log(loop, result, lr);
}

void Trainer::log(Loop& loop, const StepResult& result, double lr) {
  const auto now = std::chrono::steady_clock::now();
  const double window_s = std::chrono::duration<double>(now - loop.window_start).count();
  const double tokens_per_sec = window_s > 0 ? loop.window_tokens / window_s : 0;
  // An image model's rate is in images (it reads no tokens).
  const bool images = loop.window_tokens == 0 && loop.window_images > 0;
  const double images_per_sec = window_s > 0 ? loop.window_images / window_s : 0;
  loop.bar.update(loop.step, {{"loss", fmt(result.loss)}, {"lr", fmt(lr, 3)},
                              {images ? "img/s" : "tok/s", fmt(images ? images_per_sec : tokens_per_sec, 4)}});
  if (!writer() || (loop.step % o_.log_every != 0 && loop.step != o_.steps)) return;
  Json line = {{"step", loop.step},
               {"split", "train"},
               {"loss", result.loss},
               {"lr", lr},
               {"grad_norm", result.grad_norm},
               {"tokens_per_sec", tokens_per_sec},
               {"epoch", loop.loader.position().epoch},
               {"elapsed_s", std::chrono::duration<double>(now - loop.start).count()}};
  // Data-parallel: the step's wait for the gradient all-reduce after backward (what overlap did not hide).
  if (o_.group) line["reduce_wait_ms"] = result.reduce_ms;
  // Sharded: the step's wait for the parameters' all-gather (at its end, or in the forward when overlapped).
  if (o_.parallel.shard_optimizer > 0) line["gather_wait_ms"] = result.gather_ms;
  if (images) line.erase("tokens_per_sec"), line["images_per_sec"] = images_per_sec;
  loop.log(line);
  loop.window_start = now;
  loop.window_tokens = 0;
  loop.window_images = 0;
}

bool Trainer::validate_and_keep_best(Loop& loop) {
  const int64_t step = loop.step;
  if (!(valid_ || !valid_sources_.empty() || o_.evaluator) || !((o_.eval_every > 0 && step % o_.eval_every == 0) || step == o_.steps)) return false;
  loop.last_valid = validate(step);
  loop.last_valid["epoch"] = loop.loader.position().epoch;
  if (writer()) loop.log(loop.last_valid);
  if (!loop.last_valid.contains(o_.best_metric)) throw RuntimeError("validation has no '" + o_.best_metric + "'");
  // A figure that is undefined (null: a correlation over constant gold scores) never improves on one.
  const Json& figure = loop.last_valid[o_.best_metric];
  const double v = figure.is_number() ? figure.get<double>() : std::nan("");
  const bool better = std::isnan(best_valid_) || (o_.higher_is_better ? v > best_valid_ : v < best_valid_);
  if (better) {
    best_valid_ = v, best_step_ = step, evals_since_best_ = 0;
    const std::string best = o_.best_dir.empty() ? loop.checkpoints.path() + "/best" : o_.best_dir;
    const GeneratorStates states = generators();
    if (writer()) save_checkpoint(step, loop.loader.position(), best, states, o_.optimizer_in_exports);
    return false;
  }
  return o_.patience > 0 && ++evals_since_best_ >= o_.patience;  // early stopping: no improvement in `patience`
}

void Trainer::save_step(Loop& loop) {
  if (!((o_.save_every > 0 && loop.step % o_.save_every == 0) || loop.step == o_.steps)) return;
  const GeneratorStates states = generators();  // every rank: a collective under data parallelism
  if (!writer()) return;
  const data::LoaderPosition position = loop.loader.position();
  loop.checkpoints.save(loop.step, [&](const std::string& dir) { save_checkpoint(loop.step, position, dir, states); });
  loop.checkpoints.rotate(o_.keep_last);
}

Json Trainer::stop_interrupted(Loop& loop) {
  // Interrupted on purpose (--stop-at) or by a signal: checkpoints as they are, no final/.
  const int64_t step = loop.step;
  const GeneratorStates states = generators();  // every rank: a collective under data parallelism
  if (writer() && !fs::exists(loop.checkpoints.step_path(step))) {
    const data::LoaderPosition position = loop.loader.position();
    loop.checkpoints.save(step, [&](const std::string& dir) { save_checkpoint(step, position, dir, states); });
  }
  if (o_.group) o_.group->barrier();  // no rank reports done before rank 0's checkpoint is written
  if (loop.interrupted) {
    const int sig = StopSignals::received();
    const std::string by = sig == SIGINT || sig == SIGTERM ? StopSignals::name(sig) : "a signal on another rank";
    const std::string when = validation_pending_ ? " during the validation of step " : " after step ";
    throw Error(ExitCode::kInterrupted, "interrupted by " + by + when + std::to_string(step) + ": checkpoint " +
                                            loop.checkpoints.step_path(step) + " written; continue with the same command and --resume" +
                                            (validation_pending_ ? " (it validates step " + std::to_string(step) + " first)" : ""));
  }
  return {{"steps", step}, {"stopped_at", step}, {"train_loss", loop.last_loss}};
}

void Trainer::add_draws(Json& summary, const Loop& loop) const {
  // A mixture keeps its order, so the samples drawn are the loader's position in it.
  const data::LoaderPosition p = loop.loader.position();
  const int64_t global = train_loader_.batch_size * train_loader_.world_size;
  const auto draws = train_->draws(p.epoch * train_->size(p.epoch) + p.batch * global);
  if (draws.empty()) return;
  Json sources = Json::object();
  for (const auto& d : draws) sources[d.name] = {{"samples", d.samples}, {"epochs", d.epochs}};
  summary["train_sources"] = sources;
}

Json Trainer::finish(Loop& loop) {
  Json summary = {{"steps", loop.step},
                  {"early_stopped", early_stopped_},
                  {"best_step", best_step_},
                  {"best_" + o_.best_metric, std::isnan(best_valid_) ? Json(nullptr) : Json(best_valid_)},
                  {"resumed_from", start_step_},
                  {"skipped_steps", skipped_steps_},
                  {"train_loss", loop.last_loss},
                  {"elapsed_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - loop.start).count()}};
  if (!loop.last_valid.is_null()) summary["valid"] = loop.last_valid;
  add_draws(summary, loop);
  const GeneratorStates states = generators();  // every rank: a collective under data parallelism
  if (writer()) {
    save_checkpoint(loop.step, loop.loader.position(), o_.output + "/final", states, o_.optimizer_in_exports);
    save_json_file(o_.output + "/result.json", summary);
  }
  if (o_.group) o_.group->barrier();
  return summary;
}

}  // namespace lmkit::train
