#include "lmkit/tasks/suite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/tasks/finetune.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"

namespace lmkit::tasks {
namespace fs = std::filesystem;

namespace {

using tasks::KeyValue;
using FlagKey = tasks::SuiteKey;

// The keys every finetuned task takes: lmkit-finetune's training flags.
const std::vector<FlagKey>& finetune_keys() {
  static const std::vector<FlagKey> keys = {
      {"epochs", "--epochs", KeyValue::kInt, false},
      {"lr", "--lr", KeyValue::kNumber, false},
      {"batch_size", "--batch-size", KeyValue::kInt, true},
      {"max_length", "--max-length", KeyValue::kInt, false},
      {"max_train_examples", "--max-train-examples", KeyValue::kInt, false},
      {"max_dev_examples", "--max-dev-examples", KeyValue::kInt, false},
      {"weight_decay", "--weight-decay", KeyValue::kNumber, false},
      {"warmup_ratio", "--warmup-ratio", KeyValue::kNumber, false},
      {"clip", "--clip", KeyValue::kNumber, false},
      {"patience", "--patience", KeyValue::kInt, false},
      {"accumulation", "--accumulation", KeyValue::kInt, false},
  };
  return keys;
}

// The keys of an in-context task: lmkit-evaluate's in-context flags.
const std::vector<FlagKey>& in_context_keys() {
  static const std::vector<FlagKey> keys = {
      {"batch_size", "--batch-size", KeyValue::kInt, false},
      {"shots", "--shots", KeyValue::kInt, false},
      {"delimiter", "--delimiter", KeyValue::kString, false},
      {"example_delimiter", "--example-delimiter", KeyValue::kString, false},
  };
  return keys;
}

// The keys a task of `task` takes ("": in-context).
std::vector<FlagKey> keys_of(const std::string& task) {
  if (task.empty()) return in_context_keys();
  std::vector<FlagKey> keys = finetune_keys();
  const auto& own = tasks::task(task).suite_keys;
  keys.insert(keys.end(), own.begin(), own.end());
  return keys;
}

// Whether any task type takes `key`.
bool known_key(const std::string& key) {
  auto has = [&](const std::vector<FlagKey>& keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const FlagKey& k) { return k.key == key; });
  };
  if (has(finetune_keys()) || has(in_context_keys())) return true;
  const auto& all = tasks::tasks();
  return std::any_of(all.begin(), all.end(), [&](const tasks::TaskSpec& t) { return has(t.suite_keys); });
}

const std::set<std::string>& plain_keys() {
  static const std::set<std::string> keys = {"name", "label", "type", "train", "dev", "test", "data", "metrics", "seeds",
                                             "description", "evaluate"};
  return keys;
}

// A suite type: the registered tasks' (tasks::TaskSpec::suite_types), then in-context.
struct TypeInfo {
  std::string task;  ///< "": in-context
  tasks::SuiteType type;
};

std::map<std::string, TypeInfo> task_types() {
  std::map<std::string, TypeInfo> types;
  for (const auto& t : tasks::tasks()) {
    for (const auto& type : t.suite_types) types.emplace(type.name, TypeInfo{t.name, type});
  }
  types.emplace("in-context", TypeInfo{"", {"in-context", {"accuracy", "accuracy_norm"}, {"accuracy"}, {}, {}, false}});
  return types;
}

std::vector<std::string> names_of(const std::map<std::string, TypeInfo>& m) {
  std::vector<std::string> v;
  for (const auto& [k, _] : m) v.push_back(k);
  return v;
}

std::string flag_value(const Json& v, KeyValue kind, const std::string& where) {
  const bool ok = kind == KeyValue::kInt      ? v.is_number_integer()
                  : kind == KeyValue::kNumber ? v.is_number()
                  : kind == KeyValue::kString ? v.is_string()
                  : kind == KeyValue::kColumn ? v.is_string() || v.is_number_unsigned()
                                              : v.is_boolean();
  static const char* const expected[] = {"an integer", "a number", "a string", "a column name or 0-based index",
                                         "true or false"};
  check_input(ok, where + " must be " + expected[static_cast<int>(kind)]);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string resolve_path(const std::string& p, const std::string& root) {
  return p.empty() || fs::path(p).is_absolute() || root.empty() ? p : (fs::path(root) / p).lexically_normal().string();
}

std::string string_key(const Json& task, const std::string& key, const std::string& where, bool required) {
  if (!task.contains(key)) {
    check_input(!required, where + ": key '" + key + "' is required");
    return "";
  }
  check_input(task[key].is_string() && !task[key].get<std::string>().empty(), where + "." + key + " must be a non-empty string");
  return task[key].get<std::string>();
}

void check_name(const std::string& name, const std::string& where) {
  const bool ok = !name.empty() && name != "." && name != ".." && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
  check_input(ok, where + ".name '" + name + "' must be letters, digits, '_', '-' or '.' (it names the task's folder)");
}

// "evaluate": a registered metric's name or a list of them, other than the task's own.
std::vector<std::string> read_also_evaluate(const Json& task, const std::string& own, const std::string& where) {
  if (!task.contains("evaluate")) return {};
  const Json& e = task["evaluate"];
  std::vector<std::string> names;
  if (e.is_string()) names.push_back(e.get<std::string>());
  for (const auto& x : e.is_array() ? e : Json::array()) {
    check_input(x.is_string(), where + ".evaluate must be a metric name or a list of them");
    names.push_back(x.get<std::string>());
  }
  check_input(!names.empty(), where + ".evaluate must be a metric name or a non-empty list of them");
  std::vector<std::string> known;
  for (const auto& m : tasks::metrics()) known.push_back(m.name);
  for (const auto& n : names) {
    check_input(std::find(known.begin(), known.end(), n) != known.end(),
                where + ".evaluate: '" + n + "' is not a metric (" + join_names(known, " or ") + "; a plugin's needs --plugin)");
    check_input(n != own, where + ".evaluate: '" + n + "' is the task's own metric (its figures are in metrics)");
  }
  return names;
}

std::vector<std::string> read_metrics(const Json& task, const tasks::SuiteType& info, const std::string& where,
                                      const std::vector<std::string>& also_evaluate) {
  if (!task.contains("metrics")) return info.default_metrics;
  const Json& m = task["metrics"];
  std::vector<std::string> metrics;
  if (m.is_string()) metrics.push_back(m.get<std::string>());
  else if (m.is_array() && !m.empty()) {
    for (const auto& x : m) {
      check_input(x.is_string(), where + ".metrics must be a metric name or a list of them");
      metrics.push_back(x.get<std::string>());
    }
  } else {
    throw InputError(where + ".metrics must be a metric name or a non-empty list of them");
  }
  for (const auto& x : metrics) {
    const std::string metric = x.substr(0, x.find('.'));  // METRIC.FIGURE: a figure of an "evaluate" metric
    if (x.find('.') != std::string::npos &&
        std::find(also_evaluate.begin(), also_evaluate.end(), metric) != also_evaluate.end()) {
      continue;
    }
    check_input(std::find(info.metrics.begin(), info.metrics.end(), x) != info.metrics.end(),
                where + ".metrics: '" + x + "' is not a figure of this task type (" + join_names(info.metrics, " or ") + ")");
  }
  return metrics;
}

std::vector<int64_t> read_seeds(const Json& v, const std::string& where) {
  check_input(v.is_array() && !v.empty(), where + " must be a non-empty list of integers");
  std::vector<int64_t> seeds;
  for (const auto& s : v) {
    check_input(s.is_number_unsigned(), where + " must be a non-empty list of non-negative integers");
    const int64_t seed = s.get<int64_t>();
    check_input(std::find(seeds.begin(), seeds.end(), seed) == seeds.end(), where + " lists seed " + std::to_string(seed) + " twice");
    seeds.push_back(seed);
  }
  return seeds;
}

// A key's value checked as the app its task runs checks it (lmkit-finetune's training flags, the
// metrics' flags of lmkit-evaluate: their ranges) when the suite is read, not hours later, when the
// task's run starts after the tasks before it. --batch-size is lmkit-finetune's (evaluate's range is the same).
void check_flag_value(const std::string& flag, const std::string& value, const std::string& where) {
  CLI::App training, metrics;
  FinetuneOptions unused;
  add_training_flags(training, unused);
  add_metric_flags(metrics);
  CLI::App* app = training.get_option_no_throw(flag) != nullptr  ? &training
                  : metrics.get_option_no_throw(flag) != nullptr ? &metrics
                                                                 : nullptr;
  if (app == nullptr) return;  // a task's own key: its run checks it
  std::vector<std::string> args = {value, flag};  // CLI11 takes the arguments last first
  try {
    app->parse(args);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    if (message.rfind(flag + ": ", 0) == 0) message.erase(0, flag.size() + 2);
    throw InputError(where + ": " + message);
  }
}

// The task's flags from its keys and the suite's defaults (a default that does not apply to a task type is not given to it).
void read_flags(SuiteTask& t, const Json& task, const Json& defaults, const std::string& where) {
  const std::vector<FlagKey> keys = keys_of(t.task);
  for (auto it = task.begin(); it != task.end(); ++it) {
    const bool applies = std::any_of(keys.begin(), keys.end(), [&](const FlagKey& k) { return k.key == it.key(); });
    check_input(applies || plain_keys().count(it.key()), where + "." + it.key() + " does not apply to " + t.type + " tasks");
  }
  for (const auto& k : keys) {
    const bool own = task.contains(k.key);
    if (!own && !defaults.contains(k.key)) continue;
    const std::string value = flag_value(own ? task[k.key] : defaults[k.key], k.value, where + "." + k.key);
    if (k.value != KeyValue::kBool) check_flag_value(k.flag, value, where + "." + k.key);
    std::vector<std::string> flag = {k.flag};
    if (k.value != KeyValue::kBool) flag.push_back(value);
    else if (value == "false") flag.clear();
    auto& out = t.finetuned() ? t.finetune_flags : t.evaluate_flags;
    out.insert(out.end(), flag.begin(), flag.end());
    if (k.test_eval && t.finetuned()) t.evaluate_flags.insert(t.evaluate_flags.end(), flag.begin(), flag.end());
  }
}

void check_keys(const Json& object, const std::string& where, bool defaults) {
  check_input(object.is_object(), where + " must be a JSON object");
  for (auto it = object.begin(); it != object.end(); ++it) {
    const bool plain = plain_keys().count(it.key()) && (!defaults || it.key() == "seeds");
    check_input(known_key(it.key()) || plain, where + ": unknown key '" + it.key() + "'");
  }
}

SuiteTask read_task(const Json& task, const Json& defaults, const std::string& where, const std::string& root) {
  check_keys(task, where, false);
  SuiteTask t;
  t.name = string_key(task, "name", where, true);
  check_name(t.name, where);
  t.label = task.contains("label") ? string_key(task, "label", where, true) : t.name;
  t.type = string_key(task, "type", where, true);
  const auto types = task_types();
  const auto type = types.find(t.type);
  check_input(type != types.end(), where + ".type '" + t.type + "' is not one of " + join_names(names_of(types), " or "));
  const tasks::SuiteType& info = type->second.type;
  t.task = type->second.task;
  t.percentages = info.percentages;
  t.also_evaluate = read_also_evaluate(task, t.finetuned() ? tasks::task(t.task).metric : "in-context", where);
  check_input(t.also_evaluate.empty() || t.finetuned(), where + ".evaluate is for finetuned tasks (their checkpoint is measured)");
  t.metrics = read_metrics(task, info, where, t.also_evaluate);
  t.seeds = task.contains("seeds") ? read_seeds(task["seeds"], where + ".seeds")
            : defaults.contains("seeds") ? read_seeds(defaults["seeds"], where.substr(0, where.rfind(": tasks[")) + ": defaults.seeds")
                                         : std::vector<int64_t>{1};
  if (t.finetuned()) {
    check_input(!task.contains("data"), where + ".data is for in-context tasks (a finetuned task has train, dev and test)");
    t.train = resolve_path(string_key(task, "train", where, true), root);
    t.dev = resolve_path(string_key(task, "dev", where, true), root);
    t.test = resolve_path(string_key(task, "test", where, false), root);
  } else {
    for (const char* k : {"train", "dev", "test"}) check_input(!task.contains(k), where + "." + k + " is for finetuned tasks (an in-context task has data)");
    t.data = {resolve_path(string_key(task, "data", where, true), root)};
  }
  for (const auto& key : info.required_keys) {
    check_input(task.contains(key) || defaults.contains(key), where + ": a " + t.type + " task needs " + key);
  }
  read_flags(t, task, defaults, where);
  t.finetune_flags.insert(t.finetune_flags.end(), info.flags.begin(), info.flags.end());
  t.definition = {{"type", t.type}, {"metrics", t.metrics}, {"train", t.train}, {"dev", t.dev}, {"test", t.test},
                  {"data", t.data}, {"finetune_flags", t.finetune_flags}, {"evaluate_flags", t.evaluate_flags}};
  if (!t.also_evaluate.empty()) t.definition["evaluate"] = t.also_evaluate;
  return t;
}

}  // namespace

std::vector<int64_t> SuiteTask::run_seeds() const {
  return split() == "0-shot" ? std::vector<int64_t>{seeds.front()} : seeds;
}

std::string SuiteTask::split() const {
  if (finetuned()) return test.empty() ? "dev" : "test";
  const auto shots = std::find(evaluate_flags.begin(), evaluate_flags.end(), "--shots");
  return (shots == evaluate_flags.end() ? "0" : *std::next(shots)) + "-shot";
}

// Keys are flag names with '_' ("max_train_examples"); the flag's own spelling
// ("max-train-examples", as in --config files) is the same key.
Json underscored_keys(const Json& object, const std::string& where) {
  if (!object.is_object()) return object;
  Json out = Json::object();
  std::map<std::string, std::string> given;  // key -> as written
  for (auto it = object.begin(); it != object.end(); ++it) {
    std::string key = it.key();
    std::replace(key.begin(), key.end(), '-', '_');
    const auto [first, fresh] = given.emplace(key, it.key());
    check_input(fresh, where + ": keys '" + first->second + "' and '" + it.key() + "' name one flag");
    out[key] = it.value();
  }
  return out;
}

Suite read_suite(const std::string& path, const std::string& data_root) {
  Json j = load_json_file(path);
  check_input(j.is_object(), path + ": a suite file is a JSON object with 'tasks'");
  for (auto it = j.begin(); it != j.end(); ++it) {
    check_input(it.key() == "name" || it.key() == "description" || it.key() == "defaults" || it.key() == "tasks",
                path + ": unknown key '" + it.key() + "' (a suite has name, description, defaults and tasks)");
  }
  Suite s;
  s.path = path;
  s.name = j.contains("name") ? string_key(j, "name", path, true) : fs::path(path).stem().string();
  s.description = j.contains("description") ? string_key(j, "description", path, true) : "";
  const Json defaults = underscored_keys(j.value("defaults", Json::object()), path + ": defaults");
  check_keys(defaults, path + ": defaults", true);
  check_input(j.contains("tasks") && j["tasks"].is_array() && !j["tasks"].empty(), path + ": key 'tasks' must be a non-empty list");
  std::set<std::string> seen;
  for (size_t i = 0; i < j["tasks"].size(); ++i) {
    const std::string where = path + ": tasks[" + std::to_string(i) + "]";
    s.tasks.push_back(read_task(underscored_keys(j["tasks"][i], where), defaults, where, data_root));
    check_input(seen.insert(s.tasks.back().name).second, where + ": a second task named '" + s.tasks.back().name + "'");
  }
  return s;
}

void select_tasks(Suite& suite, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<std::string> all;
  for (const auto& t : suite.tasks) all.push_back(t.name);
  for (const auto& n : names) {
    check_input(std::find(all.begin(), all.end(), n) != all.end(),
                "--tasks: '" + n + "' is not a task of " + suite.path + " (" + join_names(all) + ")");
  }
  std::vector<SuiteTask> kept;
  for (auto& t : suite.tasks) {
    if (std::find(names.begin(), names.end(), t.name) != names.end()) kept.push_back(std::move(t));
  }
  suite.tasks = std::move(kept);
}

std::pair<double, double> mean_sd(const std::vector<double>& values) {
  if (values.empty()) return {0, 0};
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  return {mean, values.size() > 1 ? std::sqrt(ss / static_cast<double>(values.size() - 1)) : 0.0};
}

namespace {

Json stats(const std::vector<double>& values) {
  const auto [mean, sd] = mean_sd(values);
  return {{"mean", mean}, {"sd", sd}, {"values", values}};
}

}  // namespace

Json task_figures(const SuiteTask& task, const std::vector<Json>& results, const std::vector<int64_t>& seeds) {
  // Text-to-text figures are percentages already (BLEU, SQuAD's EM and F1, ROUGE); the rest are fractions.
  const double scale = task.percentages ? 1.0 : 100.0;
  Json metrics = Json::object();
  std::vector<double> scores(results.size(), 0.0);
  // The score averages the task's own figures; an "evaluate" metric's (METRIC.FIGURE: a calibration
  // error, lower is better) is shown beside them, unless it is all there is.
  std::vector<std::string> scored;
  for (const auto& m : task.metrics) {
    if (m.find('.') == std::string::npos) scored.push_back(m);
  }
  if (scored.empty()) scored = task.metrics;
  for (const auto& m : task.metrics) {
    std::vector<double> values;
    for (size_t i = 0; i < results.size(); ++i) {
      const Json& r = results[i];
      const std::string where = task.name + " (seed " + std::to_string(seeds[i]) + "): ";
      check_input(!(r.contains(m) && r[m].is_null()),
                  where + "'" + m + "' is undefined (null: a correlation over constant gold scores) and cannot be averaged");
      check_input(r.contains(m) && r[m].is_number(), where + "the result has no '" + m + "' figure");
      values.push_back(r[m].get<double>() * scale);
      if (std::find(scored.begin(), scored.end(), m) != scored.end()) scores[i] += values.back() / static_cast<double>(scored.size());
    }
    metrics[m] = stats(values);
  }
  return {{"split", task.split()}, {"seeds", seeds}, {"metrics", metrics}, {"score", stats(scores)}};
}

Json suite_row(const Suite& suite, const std::string& label, const Json& init, const Json& tasks) {
  // The average per seed: each task's score of that seed (a task run once, e.g. zero-shot, gives its one score).
  size_t runs = 0;
  std::vector<std::string> counted;
  for (const auto& t : suite.tasks) {
    if (!tasks.contains(t.name) || tasks[t.name].is_null()) continue;
    counted.push_back(t.name);
    runs = std::max(runs, tasks[t.name]["score"]["values"].size());
  }
  std::vector<double> averages(runs, 0.0);
  for (const auto& name : counted) {
    const Json& score = tasks[name]["score"];
    const auto& values = score["values"];
    for (size_t i = 0; i < runs; ++i) {
      const double v = i < values.size() ? values[i].get<double>() : score["mean"].get<double>();
      averages[i] += v / static_cast<double>(counted.size());
    }
  }
  Json average = stats(averages);
  average["tasks"] = counted;
  return {{"label", label}, {"init", init}, {"tasks", tasks}, {"average", average}};
}

Json row_difference(const Json& a, const Json& b) {
  Json tasks = Json::object();
  for (auto it = a["tasks"].begin(); it != a["tasks"].end(); ++it) {
    if (it.value().is_null() || !b["tasks"].contains(it.key()) || b["tasks"][it.key()].is_null()) continue;
    const Json& x = it.value();
    const Json& y = b["tasks"][it.key()];
    Json metrics = Json::object();
    for (auto m = x["metrics"].begin(); m != x["metrics"].end(); ++m) {
      if (y["metrics"].contains(m.key())) metrics[m.key()] = m.value()["mean"].get<double>() - y["metrics"][m.key()]["mean"].get<double>();
    }
    tasks[it.key()] = {{"metrics", metrics}, {"score", x["score"]["mean"].get<double>() - y["score"]["mean"].get<double>()}};
  }
  // The average's difference is over the tasks both rows have (a decoder's in-context task beside a random init's
  // row without it would otherwise enter one side only); it equals the difference of the averages when the tasks agree.
  double sum = 0;
  Json common = Json::array();
  for (auto it = tasks.begin(); it != tasks.end(); ++it) sum += it.value()["score"].get<double>(), common.push_back(it.key());
  const bool same_tasks = a["average"]["tasks"] == b["average"]["tasks"];
  return {{"label", a["label"].get<std::string>() + " - " + b["label"].get<std::string>()},
          {"tasks", tasks},
          {"average", common.empty() ? 0.0 : sum / static_cast<double>(common.size())},
          {"average_tasks", common},
          {"same_tasks", same_tasks}};
}

namespace {

std::string fixed(double v, bool sign = false) {
  char buf[64];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f" : "%.1f", v);
  return buf;
}

std::string cell(const Json& s) {
  const bool spread = s["values"].size() > 1;
  return fixed(s["mean"].get<double>()) + (spread ? " ± " + fixed(s["sd"].get<double>()) : "");
}

const std::map<std::string, std::string>& short_names() {
  static const std::map<std::string, std::string> names = {
      {"accuracy", "acc"},     {"macro_f1", "macro-F1"}, {"mcc", "MCC"},      {"f1", "F1"},       {"pearson", "Pearson"},
      {"spearman", "Spearman"}, {"precision", "P"},      {"recall", "R"},     {"bleu", "BLEU"},   {"exact_match", "EM"},
      {"rouge1", "ROUGE-1"},   {"rouge2", "ROUGE-2"},    {"rougeL", "ROUGE-L"}, {"accuracy_norm", "acc_norm"}};
  return names;
}

std::string heading(const SuiteTask& t) {
  std::string m;
  for (const auto& x : t.metrics) {
    const auto name = short_names().find(x);  // an "evaluate" metric's figure as it is named (calibration.ece)
    m += (m.empty() ? "" : "/") + (name == short_names().end() ? x : name->second);
  }
  return t.label + " " + m + (t.split() == "dev" ? "" : " (" + t.split() + ")");  // test, or K-shot
}

std::string metric_cells(const SuiteTask& t, const Json& figures) {
  if (figures.is_null()) return "–";
  std::string out;
  for (const auto& m : t.metrics) out += (out.empty() ? "" : " / ") + cell(figures["metrics"][m]);
  return out;
}

std::string difference_cells(const SuiteTask& t, const Json& difference) {
  if (!difference["tasks"].contains(t.name)) return "–";
  std::string out;
  for (const auto& m : t.metrics) out += (out.empty() ? "" : " / ") + fixed(difference["tasks"][t.name]["metrics"][m].get<double>(), true);
  return out;
}

// The seeds a row's figures cover: every seed its tasks ran (a zero-shot task runs its first only).
std::set<int64_t> row_seeds(const Json& row) {
  std::set<int64_t> seeds;
  for (const auto& t : row["tasks"]) {
    if (!t.is_object() || !t.contains("seeds")) continue;
    for (const auto& s : t["seeds"]) seeds.insert(s.get<int64_t>());
  }
  return seeds;
}

std::string seed_list(const std::set<int64_t>& seeds) {
  std::vector<std::string> names;
  for (int64_t s : seeds) names.push_back(std::to_string(s));
  return (names.size() == 1 ? "seed " : "seeds ") + join_names(names);
}

}  // namespace

std::string suite_markdown(const Suite& suite, const std::vector<Json>& rows, const Json& difference) {
  std::string md = "| model | average |";
  std::string rule = "|---|---|";
  for (const auto& t : suite.tasks) md += " " + heading(t) + " |", rule += "---|";
  md += "\n" + rule + "\n";
  for (const auto& r : rows) {
    md += "| " + r["label"].get<std::string>() + " | " + (r["average"]["tasks"].empty() ? "–" : cell(r["average"])) + " |";
    for (const auto& t : suite.tasks) md += " " + metric_cells(t, r["tasks"].value(t.name, Json())) + " |";
    md += "\n";
  }
  if (!difference.is_null()) {
    md += "| difference | " + fixed(difference["average"].get<double>(), true) + (difference["same_tasks"].get<bool>() ? "" : "*") + " |";
    for (const auto& t : suite.tasks) md += " " + difference_cells(t, difference) + " |";
    md += "\n";
  }
  // The seeds the rows' figures cover (--collect may table runs of other seeds than the suite file's), and
  // each row that covers fewer.
  std::vector<std::set<int64_t>> per_row;
  std::set<int64_t> seeds;
  for (const auto& r : rows) {
    per_row.push_back(row_seeds(r));
    seeds.insert(per_row.back().begin(), per_row.back().end());
  }
  if (seeds.empty()) {
    for (const auto& t : suite.tasks) seeds.insert(t.seeds.begin(), t.seeds.end());
  }
  std::string fewer;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (per_row[i].empty() || per_row[i] == seeds) continue;
    fewer += (fewer.empty() ? "" : "; ") + rows[i]["label"].get<std::string>() + ": " + seed_list(per_row[i]);
  }
  md += "\nFigures in %, mean ± sample sd over " + seed_list(seeds) + (fewer.empty() ? "" : " (" + fewer + ")") +
        " (a zero-shot in-context task runs once); the average is the mean of the task scores (a task's score is the mean "
        "of its figures, as GLUE averages MRPC's F1 and accuracy" +
        (std::any_of(suite.tasks.begin(), suite.tasks.end(), [](const SuiteTask& t) { return !t.also_evaluate.empty(); })
             ? "; an \"evaluate\" metric's figure, METRIC.FIGURE, is shown, not averaged" : "") +
        "); dev sets unless a test split is named; –: the task does not apply to the model." +
        (!difference.is_null() && !difference["same_tasks"].get<bool>()
             ? " *: the rows average different tasks; the difference is over the " +
                   std::to_string(difference["average_tasks"].size()) +
                   (difference["average_tasks"].size() == 1 ? " task" : " tasks") + " both have."
             : "") +
        "\n";
  return md;
}

}  // namespace lmkit::tasks
