// lmkit-suite: a checkpoint (or a model at random initialisation) through a suite of
// tasks — finetuning with lmkit-finetune (then lmkit-evaluate on a test set) and
// in-context scoring with lmkit-evaluate, each task for each seed — and a GLUE-style
// table of the results (Markdown and JSON), beside a baseline when one is given.
// Finished runs are kept: a second call (after a kill, or with more tasks) runs only
// what is missing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <fstream>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/tasks/suite.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tasks/suite_process.h"
#include "lmkit/tasks/task.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string suite, data_root, checkpoint, init, model, tokenizer, output, baseline, name;
  std::vector<std::string> tasks, collect;
  std::vector<int64_t> seeds;
  std::string device = "cpu", dtype = "fp32";
  int threads = 0;
  bool dry_run = false, deterministic = false;
};

// What the tasks start from: a checkpoint, or a model config and tokenizer at random initialisation.
struct Init {
  std::string checkpoint, model, tokenizer, label;
  std::string model_type;  ///< decides which tasks apply
  std::vector<std::string> flags() const {
    return checkpoint.empty() ? std::vector<std::string>{"--init", "random", "--model", model, "--tokenizer", tokenizer}
                              : std::vector<std::string>{"--checkpoint", checkpoint};
  }
  Json json() const {
    return checkpoint.empty() ? Json{{"init", "random"}, {"model", model}, {"tokenizer", tokenizer}} : Json{{"checkpoint", checkpoint}};
  }
};

std::string model_type_of(const std::string& config_path) {
  return models::family_of_config(load_json_file(config_path), config_path).model_type;
}

Init make_init(const Args& a) {
  Init i;
  if (a.init.empty()) {
    check_input(!a.checkpoint.empty(), "give --checkpoint DIR, or --init random with --model and --tokenizer");
    check_input(a.model.empty() && a.tokenizer.empty(), "--model and --tokenizer go with --init random");
    check_input(fs::is_regular_file(a.checkpoint + "/config.json"), a.checkpoint + ": not a checkpoint directory (no config.json)");
    i.checkpoint = a.checkpoint;
    i.label = a.checkpoint;
    i.model_type = model_type_of(a.checkpoint + "/config.json");
  } else {
    check_input(a.init == "random", "--init takes 'random' (or give --checkpoint DIR)");
    check_input(a.checkpoint.empty(), "give --checkpoint or --init random, not both");
    check_input(!a.model.empty() && !a.tokenizer.empty(), "--init random needs --model PRESET.json and --tokenizer");
    i.model = a.model;
    i.tokenizer = a.tokenizer;
    i.label = "random init";
    i.model_type = model_type_of(a.model);
  }
  if (!a.name.empty()) i.label = a.name;
  return i;
}

// The random-init twin of a checkpoint: its config and tokenizer, no weights.
Init random_twin(const Init& pretrained) {
  Init i;
  i.model = pretrained.checkpoint + "/config.json";
  i.tokenizer = pretrained.checkpoint;
  i.label = "random init (" + pretrained.model_type + ")";
  i.model_type = pretrained.model_type;
  return i;
}

// Whether a task applies to a family: its head exists (in-context scoring needs a causal LM).
bool applies(const tasks::SuiteTask& t, const std::string& model_type) {
  const models::Family& f = models::family(model_type);
  if (t.finetuned()) return !f.head(tasks::task(t.task).head).empty();
  return !f.head(models::kTextToTextHead).empty() && !f.encoder_decoder;
}

}  // namespace

namespace {

// Where one run of a task lives: its run directory, the stamp saying what finished there, its log.
struct RunPaths {
  std::string dir, stamp, log;
};

RunPaths run_paths(const std::string& out, const std::string& task, int64_t seed) {
  const std::string s = "seed-" + std::to_string(seed);
  return {out + "/" + task + "/" + s, out + "/" + task + "/" + s + ".json", out + "/logs/" + task + "-" + s + ".log"};
}

std::vector<std::string> runtime_flags(const Args& a, int64_t seed) {
  std::vector<std::string> f = {"--seed", std::to_string(seed), "--device", a.device};
  if (a.threads > 0) f.insert(f.end(), {"--threads", std::to_string(a.threads)});
  if (a.deterministic) f.push_back("--deterministic");
  return f;
}

void append(std::vector<std::string>& to, const std::vector<std::string>& more) { to.insert(to.end(), more.begin(), more.end()); }

// The commands of one run: finetune (then evaluate on the test set), or the in-context evaluation.
std::vector<std::vector<std::string>> run_commands(const Args& a, const tasks::SuiteTask& t, const Init& init, const RunPaths& p,
                                                   int64_t seed) {
  const std::string evaluate = tasks::sibling_app("lmkit-evaluate");
  if (!t.finetuned()) {
    std::vector<std::string> c = {evaluate, "--checkpoint", init.checkpoint, "--metric", "in-context", "--data", t.data[0],
                                  "--output", p.dir + "/result.json", "--predictions", p.dir + "/predictions.jsonl", "--overwrite"};
    append(c, t.evaluate_flags), append(c, runtime_flags(a, seed));
    return {c};
  }
  const tasks::TaskSpec& spec = tasks::task(t.task);
  std::vector<std::string> f = {tasks::sibling_app("lmkit-finetune"), "--task", spec.name};
  append(f, init.flags()), append(f, t.finetune_flags);
  // A task run is started anew (--overwrite) when it did not finish, so it keeps only best/ (--keep best).
  append(f, {"--train", t.train, "--dev", t.dev, "--output", p.dir, "--overwrite", "--keep", "best", "--dtype", a.dtype});
  append(f, runtime_flags(a, seed));
  std::vector<std::vector<std::string>> commands = {f};
  if (!t.test.empty()) {
    std::vector<std::string> e = {evaluate, "--checkpoint", p.dir + "/best", "--data", t.test, "--metric", spec.metric,
                                  "--output", p.dir + "/test.json", "--overwrite"};
    append(e, {"--predictions", p.dir + "/test-" + spec.predictions});
    append(e, t.evaluate_flags), append(e, runtime_flags(a, seed));
    commands.push_back(e);
  }
  // The suite task's other metrics ("evaluate"), on the split its figures are of.
  for (const auto& m : t.also_evaluate) {
    std::vector<std::string> e = {evaluate, "--checkpoint", p.dir + "/best", "--data", t.test.empty() ? t.dev : t.test,
                                  "--metric", m, "--output", p.dir + "/" + m + ".json", "--overwrite"};
    append(e, t.evaluate_flags), append(e, runtime_flags(a, seed));
    commands.push_back(e);
  }
  return commands;
}

std::string result_file(const tasks::SuiteTask& t, const RunPaths& p) {
  return p.dir + (t.finetuned() && !t.test.empty() ? "/test.json" : "/result.json");
}

// A run's figures: its task's result, and each "evaluate" metric's as METRIC.FIGURE.
Json run_result(const tasks::SuiteTask& t, const RunPaths& p) {
  Json r = load_json_file(result_file(t, p));
  for (const auto& m : t.also_evaluate) {
    const Json more = load_json_file(p.dir + "/" + m + ".json");
    for (auto it = more.begin(); it != more.end(); ++it) {
      if (it.value().is_number()) r[m + "." + it.key()] = it.value();
    }
  }
  return r;
}

// What a file holds, cheaply: its size, its modification time and a hash (FNV-1a) of its
// first MB. Paths refilled with other weights or data give another fingerprint.
std::string fingerprint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return fs::is_directory(path, ec) ? "directory" : "missing";
  std::ifstream in(path, std::ios::binary);
  std::string head(1 << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : head) h = (h ^ c) * 1099511628211ull;
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  char text[96];
  std::snprintf(text, sizeof text, "%llu:%lld:%016llx", static_cast<unsigned long long>(fs::file_size(path, ec)),
                static_cast<long long>(mtime), static_cast<unsigned long long>(h));
  return text;
}

// What a finished run records: the task's definition, the start, the seed and dtype, and
// the fingerprints of the weights and data it read. Another stamp: run it again.
Json stamp_of(const Args& a, const tasks::SuiteTask& t, const Init& init, int64_t seed) {
  Json inputs = Json::object();
  std::vector<std::string> files = {t.train, t.dev, t.test};
  files.insert(files.end(), t.data.begin(), t.data.end());
  files.push_back(init.checkpoint.empty() ? init.model : init.checkpoint + "/model.safetensors");
  for (const auto& f : files) {
    if (!f.empty()) inputs[f] = fingerprint(f);
  }
  return {{"task", t.definition}, {"init", init.json()}, {"seed", seed}, {"dtype", a.dtype}, {"inputs", inputs}};
}

bool finished(const tasks::SuiteTask& t, const RunPaths& p, const Json& stamp) {
  std::error_code ec;
  if (!fs::is_regular_file(p.stamp, ec) || !fs::is_regular_file(result_file(t, p), ec)) return false;
  for (const auto& m : t.also_evaluate) {
    if (!fs::is_regular_file(p.dir + "/" + m + ".json", ec)) return false;
  }
  try {
    return Json::parse(read_file(p.stamp)) == stamp;
  } catch (const std::exception&) {
    return false;
  }
}

// One seed of one task: its figures, from the finished run or a new one.
Json run_seed(const Args& a, const tasks::SuiteTask& t, const Init& init, const std::string& out, int64_t seed) {
  const RunPaths p = run_paths(out, t.name, seed);
  const Json stamp = stamp_of(a, t, init, seed);
  const std::string what = t.name + " seed " + std::to_string(seed);
  if (!a.dry_run && finished(t, p, stamp)) {
    std::fprintf(stderr, "%s: finished earlier (%s)\n", what.c_str(), result_file(t, p).c_str());
    return run_result(t, p);
  }
  const auto commands = run_commands(a, t, init, p, seed);
  if (a.dry_run) {
    for (const auto& c : commands) std::printf("%s\n", tasks::command_line(c).c_str());
    return Json();
  }
  std::error_code ec;
  fs::remove(p.stamp, ec);
  make_output_directory(t.finetuned() ? fs::path(p.dir).parent_path().string() : p.dir);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& c : commands) {
    std::fprintf(stderr, "%s: %s (log: %s)\n", what.c_str(), fs::path(c[0]).filename().c_str(), p.log.c_str());
    tasks::run_app_logged(c, p.log, what);
  }
  const Json result = run_result(t, p);
  save_json_file(p.stamp, stamp);
  std::fprintf(stderr, "%s: done in %.0f s\n", what.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return result;
}

// A suite run directory: a fresh or empty one, or one of an earlier call with the same start.
void prepare_output(const std::string& out, const Init& init) {
  const std::string marker = out + "/suite-run.json";
  std::error_code ec;
  if (fs::exists(marker, ec)) {
    const Json earlier = load_json_file(marker);
    check_input(earlier.value("init", Json()) == init.json(), "--output " + out + " holds the suite runs of " +
                                                                  earlier.value("init", Json()).dump() + ", not " +
                                                                  init.json().dump() + ": give another --output");
    return;
  }
  check_input(!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec)),
              "--output " + out + ": exists and is not a suite run directory (give a new or empty one)");
  make_output_directory(out);
  make_output_directory(out + "/logs");
  save_json_file(marker, {{"init", init.json()}});
}

void write_results(const std::string& out, const tasks::Suite& suite, const std::vector<Json>& rows, const Json& difference) {
  const Json j = {{"suite", suite.name}, {"suite_file", suite.path}, {"rows", rows}, {"difference", difference}};
  save_json_file(out + "/results.json", j);
  write_file_atomic(out + "/results.md", "# " + suite.name + "\n\n" + tasks::suite_markdown(suite, rows, difference));
}

// Every task of the suite from one start; its row of the table (null on --dry-run).
Json run_suite(const Args& a, const tasks::Suite& suite, const Init& init, const std::string& out) {
  std::unique_ptr<RunLock> lock;
  if (!a.dry_run) prepare_output(out, init), lock = std::make_unique<RunLock>(out);
  Json tasks = Json::object();
  for (const auto& t : suite.tasks) {
    if (!applies(t, init.model_type) || (!t.finetuned() && init.checkpoint.empty())) {
      std::fprintf(stderr, "%s: does not apply to %s (%s)\n", t.name.c_str(), init.label.c_str(),
                   t.finetuned() ? ("no " + t.type + " head for " + init.model_type).c_str()
                   : init.checkpoint.empty() ? "in-context scoring needs a checkpoint"
                                             : "in-context scoring needs a causal LM");
      tasks[t.name] = nullptr;
      continue;
    }
    std::vector<Json> results;
    for (int64_t seed : t.run_seeds()) results.push_back(run_seed(a, t, init, out, seed));
    if (!a.dry_run) tasks[t.name] = tasks::task_figures(t, results, t.run_seeds());
  }
  if (a.dry_run) return Json();
  Json row = tasks::suite_row(suite, init.label, init.json(), tasks);
  write_results(out, suite, {row}, Json());
  return row;
}

}  // namespace

namespace {

// Every data file exists before hours of runs begin (parallel text-to-text files are PREFIX.LANG).
void check_task_files(const tasks::Suite& suite) {
  for (const auto& t : suite.tasks) {
    const bool parallel = std::find(t.finetune_flags.begin(), t.finetune_flags.end(), "--source-lang") != t.finetune_flags.end();
    for (const auto& f : {t.train, t.dev, t.test}) {
      if (f.empty() || parallel) continue;
      check_input(fs::exists(f), suite.path + ": task " + t.name + ": " + f + ": no such file (is --data-root right?)");
    }
    for (const auto& f : t.data) {
      check_input(fs::exists(f), suite.path + ": task " + t.name + ": " + f + ": no such file (is --data-root right?)");
    }
  }
}

// A finished suite run's row: --baseline DIR.
Json read_baseline(const std::string& dir, const tasks::Suite& suite) {
  const std::string file = dir + "/results.json";
  check_input(fs::is_regular_file(file), "--baseline " + dir + ": no results.json (give a finished lmkit-suite --output, or 'random')");
  const Json j = load_json_file(file);
  check_input(j.is_object() && j.contains("rows") && j["rows"].is_array() && !j["rows"].empty(), file + ": not an lmkit-suite result");
  check_input(j.value("suite", "") == suite.name, file + ": results of suite '" + j.value("suite", "") + "', not '" + suite.name + "'");
  return j["rows"][0];
}

// --collect: the rows of finished suite runs in one table (a row in two of them, e.g. a shared baseline, once).
void collect(const Args& a, const tasks::Suite& suite) {
  std::vector<Json> rows;
  std::vector<std::string> from;  // the directory each row came from
  for (const auto& dir : a.collect) {
    const std::string file = dir + "/results.json";
    check_input(fs::is_regular_file(file), "--collect " + dir + ": no results.json (not a finished lmkit-suite --output)");
    const Json j = load_json_file(file);
    check_input(j.is_object() && j.contains("rows") && j["rows"].is_array(), file + ": not an lmkit-suite result");
    check_input(j.value("suite", "") == suite.name, file + ": results of suite '" + j.value("suite", "") + "', not '" + suite.name + "'");
    for (const auto& row : j["rows"]) {
      const auto seen = std::find_if(rows.begin(), rows.end(), [&](const Json& r) {
        return r["label"] == row["label"] && r["init"] == row["init"];
      });
      if (seen == rows.end()) {
        rows.push_back(row), from.push_back(dir);
        continue;
      }
      // The same start twice (a baseline row both runs share is one row): which figures would be its?
      const std::string other = from[static_cast<size_t>(seen - rows.begin())];
      check_input(*seen == row || other == dir, "--collect: " + other + " and " + dir + " both hold runs of '" +
                                                     row.value("label", std::string("?")) +
                                                     "' with other figures: collect one of them, or run its seeds into one --output");
    }
  }
  std::printf("%s", tasks::suite_markdown(suite, rows, Json()).c_str());
}

// The suite file: --suite, or for --collect the one the first run directory's results.json names.
std::string suite_file(const Args& a) {
  if (!a.suite.empty()) return a.suite;
  check_input(!a.collect.empty(), "--suite FILE is required (the suite to run)");
  const std::string results = a.collect.front() + "/results.json";
  check_input(fs::is_regular_file(results), "--collect " + a.collect.front() + ": no results.json (not a finished lmkit-suite --output)");
  const Json j = load_json_file(results);
  const std::string file = j.is_object() ? j.value("suite_file", "") : "";
  check_input(!file.empty() && fs::is_regular_file(file),
              results + ": its suite file '" + file + "' is not there: give --suite FILE");
  return file;
}

void run(const Args& a) {
  const std::string file = suite_file(a);
  tasks::Suite suite = tasks::read_suite(file, a.data_root.empty() ? fs::path(file).parent_path().string() : a.data_root);
  tasks::select_tasks(suite, a.tasks);
  if (!a.collect.empty()) {
    check_input(a.checkpoint.empty() && a.init.empty() && a.output.empty() && a.baseline.empty(),
                "--collect makes a table of finished runs: no --checkpoint, --init, --output or --baseline");
    return collect(a, suite);
  }
  check_input(!a.output.empty(), "--output DIR is required (the suite run directory)");
  const Init init = make_init(a);
  if (!a.seeds.empty()) {
    for (size_t i = 0; i < a.seeds.size(); ++i) {
      check_input(std::find(a.seeds.begin(), a.seeds.begin() + static_cast<std::ptrdiff_t>(i), a.seeds[i]) ==
                      a.seeds.begin() + static_cast<std::ptrdiff_t>(i),
                  "--seeds lists seed " + std::to_string(a.seeds[i]) + " twice");
    }
    for (auto& t : suite.tasks) t.seeds = a.seeds;
  }
  check_task_files(suite);
  const bool random_baseline = a.baseline == "random";
  check_input(!random_baseline || !init.checkpoint.empty(), "--baseline random compares a --checkpoint with its random initialisation");
  const Json baseline_row = a.baseline.empty() || random_baseline ? Json() : read_baseline(a.baseline, suite);
  std::vector<Json> rows = {run_suite(a, suite, init, a.output)};
  if (random_baseline) rows.push_back(run_suite(a, suite, random_twin(init), a.output + "/random"));
  if (a.dry_run) return;
  if (!baseline_row.is_null()) rows.push_back(baseline_row);
  const Json difference = rows.size() > 1 ? tasks::row_difference(rows[0], rows[1]) : Json();
  write_results(a.output, suite, rows, difference);
  std::printf("%s", tasks::suite_markdown(suite, rows, difference).c_str());
  std::printf("\nresults: %s/results.md, %s/results.json\n", a.output.c_str(), a.output.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-suite: a checkpoint (or --init random) through a suite of finetuning and in-context tasks, "
               "every task for every seed, into a GLUE-style table (docs/suite.md)");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();
  Args a;
  app.add_option("--suite", a.suite, "suite file (JSON: data/suites/glue.json); --collect: default, the one the runs used");
  app.add_option("--data-root", a.data_root, "folder the suite's relative data paths start from (default: the suite file's)");
  app.add_option("--checkpoint", a.checkpoint, "pretrained checkpoint directory");
  app.add_option("--init", a.init, "'random': no pretraining (with --model and --tokenizer)");
  app.add_option("--model", a.model, "model preset or config.json for --init random");
  app.add_option("--tokenizer", a.tokenizer, "tokenizer for --init random (a directory, PATH.model or tokenizer.json)");
  app.add_option("--output", a.output, "suite run directory (a second call goes on where the first stopped)");
  app.add_option("--baseline", a.baseline, "'random': the checkpoint's config at random initialisation, run here too "
                 "(into OUTPUT/random); or DIR: a finished lmkit-suite output to compare with");
  app.add_option("--tasks", a.tasks, "only these tasks (comma-separated names)")->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--seeds", a.seeds, "these seeds for every task (comma-separated; default: the suite's)")->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->check(non_negative());
  app.add_option("--name", a.name, "the row's name in the table (default: the checkpoint's path, or 'random init')");
  app.add_option("--device", a.device, "cpu, cuda or cuda:N (given to every run)");
  app.add_option("--threads", a.threads, "CPU threads of every run (0: the apps' default, OMP_NUM_THREADS where set, else every core)")->check(non_negative());
  app.add_option("--dtype", a.dtype, "fp32, bf16 autocast or bf16-weights in finetuning (lmkit-finetune --dtype)")
      ->check(CLI::IsMember({"fp32", "bf16", "bf16-weights"}));
  app.add_flag("--deterministic", a.deterministic, "given to every run: deterministic kernels only (docs/training.md)");
  app.add_flag("--dry-run", a.dry_run, "print the commands of the runs still to do, run nothing");
  app.add_option("--collect", a.collect, "print one table of these finished suite runs (comma-separated --output "
                 "directories), run nothing")->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  return run_app(app, argc, argv, [&] {
    tasks::catch_stop_signals();
    run(a);
  });
}
