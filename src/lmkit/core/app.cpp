#include "lmkit/core/app.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/runtime.h"

namespace lmkit {

namespace {

// A number as the user would write it: 1, 0.5, 65536 (not 1.000000 or 6.553600e+04).
std::string plain(double v) {
  std::ostringstream out;
  out << std::setprecision(12) << v;
  return out.str();
}

CLI::Validator bound(const std::string& description, std::function<bool(double)> ok) {
  return CLI::Validator(
      [description, ok](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0') return value.substr(0, 40) + " is not a number";
        return ok(v) ? std::string() : value.substr(0, 40) + " is out of range: must be " + description;
      },
      description);
}

}  // namespace

CLI::Validator positive() {
  return bound("> 0", [](double v) { return v > 0; });
}

CLI::Validator non_negative() {
  return bound(">= 0", [](double v) { return v >= 0; });
}

CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("a name, not empty") : std::string(); }, "");
}

CLI::Validator in_range(double min, double max) {
  return bound("in [" + plain(min) + ", " + plain(max) + "]", [min, max](double v) { return v >= min && v <= max; });
}

CLI::Validator in_range_below(double min, double max) {
  return bound("in [" + plain(min) + ", " + plain(max) + ")", [min, max](double v) { return v >= min && v < max; });
}

void add_runtime_flags(CLI::App& app, RuntimeOptions& options) {
  app.add_option("--threads", options.threads, "CPU threads for LibTorch (0: OMP_NUM_THREADS where set, else every core)")->check(non_negative());
  app.add_option("--device", options.device, "cpu, cuda or cuda:N");
  app.add_option("--seed", options.seed, "seed for every random number generator");
  app.add_flag("--deterministic", options.deterministic,
               "deterministic kernels only (LibTorch's; CUDA: cuDNN's and a fixed cuBLAS workspace); an op without one "
               "is an error");
}

void add_config_flag(CLI::App& app) {
  app.add_option("--config", "a JSON file of option values (keys: long option names); flags given override it")
      ->type_name("FILE");
}

namespace {

// An app's long option names without their dashes ("steps", "batch-size").
std::vector<std::string> long_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : const_cast<CLI::App&>(app).get_options()) {
    const std::string name = o->get_name(false, true);
    if (name.rfind("--", 0) == 0) names.push_back(name.substr(2));
  }
  return names;
}

// The option a user meant by an unknown `--word`: a close spelling (--stpes: --steps), else the
// option it starts or ends with as HF's Trainer names them (--warmup-steps: --warmup,
// --per-device-train-batch-size: --batch-size, --num-train-epochs: --epochs).
std::string option_hint(const std::string& word, const std::vector<std::string>& names) {
  std::string hint = closest_name(word, names);
  if (!hint.empty()) return hint;
  for (const auto& n : names) {
    const bool starts = word.size() > n.size() && word.compare(0, n.size() + 1, n + "-") == 0;
    const bool ends = word.size() > n.size() && word.compare(word.size() - n.size() - 1, n.size() + 1, "-" + n) == 0;
    if ((starts || ends) && n.size() > hint.size()) hint = n;
  }
  return hint;
}

// The option a --config key names (an InputError with a did-you-mean otherwise).
const CLI::Option& config_option(const CLI::App& app, const std::string& path, const std::string& key,
                                 const std::string& flag) {
  if (flag == "config") throw InputError(path + ": key '" + key + "': a config file cannot name another one");
  if (flag == "plugin") {
    throw InputError(path + ": key '" + key + "': plugins load before the config file is read; give --plugin FILE " +
                     "on the command line (or $LMKIT_PLUGINS)");
  }
  if (const CLI::Option* opt = app.get_option_no_throw("--" + flag)) return *opt;
  const std::string hint = option_hint(flag, long_names(app));
  throw InputError(path + ": unknown key '" + key + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
}

// A config value as the flag's arguments: "--flag" for a true flag, "--flag value" for each value.
void add_config_value(const CLI::Option& opt, const std::string& path, const std::string& key, const std::string& flag,
                      const Json& v, std::vector<std::string>& out) {
  if (opt.get_expected_max() == 0) {  // a flag (CLI11 gives flags a type size of 1 but no values)
    if (!v.is_boolean()) throw InputError(path + ": key '" + key + "' must be true or false");
    if (v.get<bool>()) out.push_back("--" + flag);
    return;
  }
  const std::string type = opt.get_type_name().substr(0, opt.get_type_name().find(':'));
  const bool integer = type == "INT" || type == "UINT", numeric = integer || type == "FLOAT";
  auto scalar = [&](const Json& x) {
    if (numeric && !x.is_number()) throw InputError(path + ": key '" + key + "' must be a number");
    if (integer && !x.is_number_integer()) throw InputError(path + ": key '" + key + "' must be an integer, not " + x.dump());
    if (type == "UINT" && x.is_number_integer() && !x.is_number_unsigned() && x.get<int64_t>() < 0) {
      throw InputError(path + ": key '" + key + "' must be a non-negative integer, not " + x.dump());
    }
    if (x.is_string()) return x.get<std::string>();
    if (x.is_number() || x.is_boolean()) return x.dump();
    throw InputError(path + ": key '" + key + "' must be a string, number or list of them");
  };
  // A list for a one-value option ("steps": [2, 3]) ran with its last element.
  if (v.is_array() && opt.get_items_expected_max() <= 1) throw InputError(path + ": key '" + key + "' takes one value, not a list");
  for (const auto& x : v.is_array() ? v : Json::array({v})) out.push_back("--" + flag), out.push_back(scalar(x));
}

// argv with the --config file's options put first, so later command-line flags win.
std::vector<std::string> expand_config(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    else if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
  }
  if (path.empty() || app.get_option_no_throw("--config") == nullptr) return args;
  const Json j = load_json_file(path);
  if (!j.is_object()) throw InputError(path + ": the config must be a JSON object");
  // The flags the command line gives itself: they replace the file's value, not add to it
  // (a flag given twice was recorded as a list, and the run's --resume was then refused).
  std::set<std::string> on_command_line;
  for (const auto& arg : args) {
    if (arg == "--") break;
    if (arg.rfind("--", 0) == 0) on_command_line.insert(arg.substr(2, arg.find('=') - 2));
  }
  std::vector<std::string> from_file;
  std::map<std::string, std::string> seen;  // flag -> the key that gave it
  for (auto it = j.begin(); it != j.end(); ++it) {
    // "batch_size" (as in suite files) and "batch-size" (the flag's spelling) are one key.
    const std::string key = it.key();
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (!seen.emplace(flag, key).second) {
      throw InputError(path + ": keys '" + seen[flag] + "' and '" + key + "' name one flag (--" + flag + ")");
    }
    const CLI::Option& opt = config_option(app, path, key, flag);
    std::vector<std::string> values;  // checked even where the command line's value wins
    add_config_value(opt, path, key, flag, it.value(), values);
    if (!on_command_line.count(flag)) from_file.insert(from_file.end(), values.begin(), values.end());
  }
  from_file.insert(from_file.end(), args.begin(), args.end());
  return from_file;
}

// CLI11 converts an integer that does not fit with strtoll's clamp (--steps
// 99999999999999999999 ran 2^63-1 steps) and takes "nan" and "inf" as numbers:
// every numeric value given, in the app and its subcommands, is checked as written.
void check_numbers(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    // "INT", or "INT:POSITIVE" with a validator's description appended.
    const std::string full = o->get_type_name(), type = full.substr(0, full.find(':'));
    const bool integer = type == "INT" || type == "UINT", real = type == "FLOAT";
    if (!integer && !real) continue;
    for (const std::string& value : o->results()) {
      const std::string name = o->get_name(false, true);
      errno = 0;
      char* end = nullptr;
      if (type == "UINT" && value.find('-') != std::string::npos) {  // strtoull wraps -1 to 2^64-1
        throw InputError(name + " " + value.substr(0, 40) + ": must be a non-negative integer");
      }
      if (integer) {
        (void)(type == "INT" ? static_cast<void>(std::strtoll(value.c_str(), &end, 10))
                             : static_cast<void>(std::strtoull(value.c_str(), &end, 10)));
        if (errno == ERANGE) throw InputError(name + " " + value.substr(0, 40) + ": out of range for an integer option");
      } else {
        const double v = std::strtod(value.c_str(), &end);
        if (end != value.c_str() && !std::isfinite(v)) throw InputError(name + " " + value.substr(0, 40) + ": not a finite number");
      }
    }
  }
  for (const CLI::App* sub : const_cast<CLI::App&>(app).get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

// An option that takes one value, given twice (--metric objective --metric mlm-perplexity):
// refused, in the app and its subcommands, instead of the last silently winning. Options that
// collect values (TakeAll, lists) and switches without a value may repeat.
void check_repeats(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_type_size() == 0 || o->get_items_expected_max() > 1 || o->count() <= 1) continue;
    if (o->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll ||
        o->get_multi_option_policy() == CLI::MultiOptionPolicy::Join) {
      continue;
    }
    std::string values, names;
    for (const std::string& v : o->results()) values += (values.empty() ? "" : ", ") + v.substr(0, 40);
    // Its long names as a user types them ("--reset-positions / --no-reset-positions"), not CLI11's
    // joined spelling with the negated flag's value ("--reset-positions,--no-reset-positions{false}").
    for (const std::string& n : o->get_lnames()) names += (names.empty() ? "--" : " / --") + n;
    throw InputError((names.empty() ? o->get_name(false, true) : names) + " is given " + std::to_string(o->count()) +
                     " times (" + values + "): it takes one value");
  }
  for (const CLI::App* sub : const_cast<CLI::App&>(app).get_subcommands([](CLI::App*) { return true; })) {
    check_repeats(*sub);
  }
}

std::atomic<bool> follower_quiet{false};

int fail(const std::string& message, ExitCode code) {
  if (code == ExitCode::kInput && follower_quiet) return static_cast<int>(code);  // rank 0 says it
  // One line: the first line of the message is what the user needs. Written whole in one
  // insertion (unbuffered cerr makes one write of it), so the lines of several ranks sharing a
  // terminal or log do not interleave ("error: error: ...").
  std::cerr << ("error: " + message.substr(0, message.find('\n')) + "\n") << std::flush;
  return static_cast<int>(code);
}

}  // namespace

namespace {

// --plugin on the app and each subcommand: load_plugins() has loaded the files before
// the flags were built; here the flag is documented and accepted.
void add_plugin_flag(CLI::App& app) {
  static std::vector<std::string> given;  // loaded already; kept only for the resolved config
  if (!app.get_option_no_throw("--plugin")) {
    app.add_option("--plugin", given, "a plugin (a shared object built on the installed lmkit) to load first: its families, "
                               "objectives, tasks, metrics, optimizers and attentions join the built-in ones (repeatable; also $LMKIT_PLUGINS, "
                               "':'-separated; docs/library.md)")
        ->type_name("FILE")
        ->allow_extra_args(false)  // one FILE a --plugin: the next word is the app's (a positional)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_plugin_flag(*sub);
}

}  // namespace

namespace {

// The words CLI11 could not place, in the order given (its own message lists them reversed, as
// run_app hands it the arguments); options were checked before parsing (check_option_words).
std::string extras_message(CLI::App& app) {
  std::vector<std::string> stray;
  for (CLI::App* a = &app; a != nullptr;) {
    for (const auto& r : a->remaining()) stray.push_back(r);
    const auto used = a->get_subcommands();
    a = used.empty() ? nullptr : used.front();
  }
  if (stray.empty()) return "";
  std::string words;
  for (const auto& w : stray) words += (words.empty() ? "" : " ") + w;
  return std::string(stray.size() == 1 ? "an argument" : "arguments") + " no option takes: " + words;
}

}  // namespace

void set_follower_quiet(bool quiet) { follower_quiet = quiet; }

int guard(const std::function<void()>& body, CLI::App* app) {
  try {
    body();
    return 0;
  } catch (const CLI::ParseError& e) {
    if (app && e.get_exit_code() == 0) return app->exit(e);  // --help, --version
    if (app && dynamic_cast<const CLI::ExtrasError*>(&e)) {
      const std::string what = extras_message(*app);
      if (!what.empty()) return fail(what + " (see --help)", ExitCode::kInput);
    }
    return fail(std::string(e.what()) + " (see --help)", ExitCode::kInput);
  } catch (const FollowerStop& e) {
    return static_cast<int>(e.code());  // rank 0's line says why
  } catch (const Error& e) {
    if (e.code() == ExitCode::kInterrupted) {  // a graceful stop, not a failure: say how to go on
      std::cerr << e.what() << std::endl;
      return static_cast<int>(e.code());
    }
    return fail(e.what(), e.code());
  } catch (const c10::Error& e) {
    // "out of memory: tried to allocate N bytes" instead of LibTorch's enforce text.
    if (const auto oom = out_of_memory(e)) {
      return fail("out of memory: " + *oom + " (is a size in the model config or the flags larger than meant?)",
                  ExitCode::kRuntime);
    }
    return fail(e.what_without_backtrace(), ExitCode::kRuntime);
  } catch (const std::bad_alloc&) {
    return fail("out of memory", ExitCode::kRuntime);
  } catch (const std::exception& e) {
    return fail(e.what(), ExitCode::kRuntime);
  }
}

namespace {

// Help a person reads: "--rouge-stemmer, --no-rouge-stemmer" (not CLI11's
// "--rouge-stemmer,--no-rouge-stemmer{false}"), the value's kind and check without
// the default glued to it ("INT:> 0", not "INT:> 0=32"), every default in the
// description, and long descriptions wrapped under their option.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (positional) return CLI::Formatter::make_option_name(opt, positional);
    std::string names;
    int braces = 0;
    for (const char c : opt->get_name(false, true)) {
      if (c == '{' || c == '}') braces += c == '{' ? 1 : -1;
      else if (braces == 0) names += c == ',' ? std::string(", ") : std::string(1, c);
    }
    return names;
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    std::string out;
    if (opt->get_type_size() == 0) return out;
    if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " REQUIRED";
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    const std::string def = opt->get_default_str();
    // Not again where the description says it ("(default ...)", or "(0: all)" for a default 0).
    const bool shown = def.empty() || def == "[]" || desc.find("default") != std::string::npos ||
                       desc.find("(" + def + ":") != std::string::npos;
    if (opt->get_type_size() != 0 && !opt->get_required() && !shown) desc += " (default: " + def + ")";
    return desc;
  }

  std::string make_option(const CLI::Option* opt, bool positional) const override {
    constexpr size_t kColumn = 30, kWidth = 110;
    const std::string head = "  " + make_option_name(opt, positional) + make_option_opts(opt);
    std::vector<std::string> lines(1);  // the description, wrapped at kWidth
    std::istringstream words(make_option_desc(opt));
    for (std::string word; words >> word;) {
      if (!lines.back().empty() && kColumn + lines.back().size() + 1 + word.size() > kWidth) lines.emplace_back();
      lines.back() += (lines.back().empty() ? "" : " ") + word;
    }
    std::string out = head;
    size_t i = 0;
    if (head.size() + 1 < kColumn && !lines[0].empty()) out += std::string(kColumn - head.size(), ' ') + lines[i++];
    out += "\n";
    for (; i < lines.size(); ++i) {
      if (!lines[i].empty()) out += std::string(kColumn, ' ') + lines[i] + "\n";
    }
    return out;
  }
};

// Every option's default as the help shows it (the value its variable holds before parsing).
void show_defaults(CLI::App& app, const std::shared_ptr<CLI::Formatter>& formatter) {
  app.formatter(formatter);
  for (CLI::Option* o : app.get_options()) {
    if (o->get_default_str().empty()) o->capture_default_str();
  }
  for (CLI::App* sub : app.get_subcommands({})) show_defaults(*sub, formatter);
}

// "lmkit-tokenize bogus": the word that is not a subcommand is named, with those there are
// (CLI11 said only "A subcommand is required"). Options of the app itself take their value.
void check_subcommand_word(CLI::App& app, const std::vector<std::string>& args) {
  const auto subs = app.get_subcommands([](CLI::App*) { return true; });
  if (subs.empty()) return;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;
    if (arg.rfind("-", 0) == 0) {
      const CLI::Option* o = arg.find('=') == std::string::npos ? app.get_option_no_throw(arg) : nullptr;
      if (o && o->get_expected_max() > 0) ++i;  // its value
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* s : subs) {
      if (s->get_name() == arg) return;
      names.push_back(s->get_name());
    }
    throw InputError("'" + arg + "' is not a subcommand of " + app.get_name() + " (" + join_names(names, " or ") + ")");
  }
}

}  // namespace

// Every `--name` among the arguments is an option of the app or of the subcommand it follows,
// checked before CLI11 parses (which would first report a missing required option, or take the
// value after a misspelt option for a subcommand): else "unknown option --trian (did you mean
// --train?)".
void check_option_words(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  auto subcommand = [&at](const std::string& word) -> CLI::App* {  // at's subcommand named `word`, if any
    for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) {
      if (sub->check_name(word)) return sub;
    }
    return nullptr;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;
    if (arg.rfind("--", 0) != 0) {
      if (CLI::App* sub = subcommand(arg)) at = sub;
      continue;
    }
    const std::string name = arg.substr(0, arg.find('='));
    const CLI::Option* o = nullptr;
    for (CLI::App* a = at; a != nullptr && o == nullptr; a = a->get_parent()) o = a->get_option_no_throw(name);
    if (o == nullptr) {
      std::string hint = option_hint(name.substr(2), long_names(*at));
      hint = hint.empty() ? "" : " (did you mean --" + hint + "?)";
      // A subcommand's option given before the subcommand: lmkit-tokenize --threads 2 encode.
      std::string meant;
      std::vector<std::string> owners;
      for (CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) {
        const std::string theirs = hint.empty() ? option_hint(name.substr(2), long_names(*sub)) : "";
        if (theirs.empty() || (!meant.empty() && theirs != meant)) continue;
        meant = theirs;
        owners.push_back("'" + sub->get_name() + "'");
      }
      if (!meant.empty()) hint = " (--" + meant + " is an option of " + join_names(owners, " and ") + ": give it after the subcommand)";
      throw InputError("unknown option " + name + hint + " (see --help)");
    }
    if (arg.find('=') != std::string::npos || o->get_expected_max() == 0) continue;
    if (o->get_expected_max() == 1 || !o->get_allow_extra_args()) {
      ++i;  // its value, whatever it looks like (--lr -1); --plugin FILE takes one an occurrence
      continue;
    }
    // A list's values: up to the next option or subcommand.
    while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0 && subcommand(args[i + 1]) == nullptr) ++i;
  }
}

int run_app(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  add_plugin_flag(app);
  show_defaults(app, std::make_shared<HelpFormatter>());
  // "Usage: lmkit-finetune [OPTIONS]", not "Usage: [OPTIONS]".
  if (app.get_name().empty() && argc > 0) app.name(std::filesystem::path(argv[0]).filename().string());
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which the writers report as
  // one error line and clean up after, instead of SIGXFSZ killing the process mid-write.
  ::signal(SIGXFSZ, SIG_IGN);
  // Subcommand callbacks run inside parse(), so parsing and the body share one handler.
  return guard(
      [&] {
        // CLI11 wants the arguments reversed when given as a vector.
        std::vector<std::string> args = expand_config(app, argc, argv);
        check_option_words(app, args);
        check_subcommand_word(app, args);
        std::reverse(args.begin(), args.end());
        // After parsing, before any callback: subcommands' bodies run inside parse().
        app.parse_complete_callback([&app] {
          check_repeats(app);
          check_numbers(app);
        });
        app.parse(args);
        body();
      },
      &app);
}

Json resolved_options(const CLI::App& app) {
  Json j = Json::object();
  for (const CLI::Option* o : app.get_options()) {
    const std::string name = o->get_name(false, true);
    if (name.rfind("--", 0) != 0 || name == "--help" || name == "--config") continue;
    const std::string key = name.substr(2);
    if (o->get_type_size() == 0) {
      j[key] = o->count() > 0;
    } else if (o->count() > 0) {
      const auto& r = o->results();
      j[key] = r.size() == 1 ? Json(r[0]) : Json(r);
    } else if (!o->get_default_str().empty()) {
      j[key] = o->get_default_str();
    }
  }
  return j;
}

void TensorBoardFlags::check() const {
  if (!off && !dir.empty()) make_output_directory(dir, "--tensorboard");
}

void add_tensorboard_flags(CLI::App& app, TensorBoardFlags& flags) {
  auto* dir = app.add_option("--tensorboard", flags.dir,
                             "TensorBoard event files here (default: the run directory; tensorboard --logdir runs/)");
  app.add_flag("--no-tensorboard", flags.off, "write no TensorBoard event files")->excludes(dir);
}

}  // namespace lmkit
