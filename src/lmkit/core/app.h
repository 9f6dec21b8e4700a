// The skeleton every app's main() shares: CLI11 parsing, the runtime flags,
// and the translation of every failure into one `error:` line and an exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "lmkit/core/config.h"
#include "lmkit/core/runtime.h"

namespace lmkit {

/// Range checks for numeric flags whose failure is one short line naming the flag
/// and the valid range ("--batch-size: 0 is out of range: must be > 0"), unlike
/// positive()'s ("Value 0 not in range 0.000000 to 1.797693e+308").
CLI::Validator positive();      ///< > 0 (for an integer flag: >= 1)
CLI::Validator non_negative();  ///< >= 0
CLI::Validator in_range(double min, double max);  ///< min <= value <= max
CLI::Validator in_range_below(double min, double max);  ///< min <= value < max (Adam's betas: [0, 1))
CLI::Validator non_empty();     ///< a string flag's value is not "" (a field name)

/// Adds --threads, --device and --seed to `app`, filling `options`.
void add_runtime_flags(CLI::App& app, RuntimeOptions& options);

/// A training app's --tensorboard DIR and --no-tensorboard.
struct TensorBoardFlags {
  std::string dir;   ///< "" : the run directory
  bool off = false;
  /// Where event files go for a run in `run_dir` ("" when off).
  std::string resolve(const std::string& run_dir) const { return off ? "" : dir.empty() ? run_dir : dir; }
  /// Makes --tensorboard DIR (InputError naming the flag when it cannot be a directory): before training.
  void check() const;
};
void add_tensorboard_flags(CLI::App& app, TensorBoardFlags& flags);

/// Adds `--config run.json`: a JSON object whose keys are the app's long option
/// names without dashes ("steps", "batch-size"); command-line flags override it.
/// Unknown keys and wrong types are errors naming the key and the file. Call
/// before run_app, after every option is added.
void add_config_flag(CLI::App& app);

/// Every option's value after parsing, as JSON keyed like --config files (the resolved config).
Json resolved_options(const CLI::App& app);

/// Parses argv into `app` and runs `body`. Returns the process exit code:
/// 0 on success, 2 for usage/config/input errors (lmkit::Error of kind kInput,
/// CLI11 parse errors), 1 for anything else; each failure prints one line
/// `error: ...` on stderr. Nothing escapes as an uncaught exception.
int run_app(CLI::App& app, int argc, char** argv, const std::function<void()>& body);
/// Runs `body` as run_app runs an app's: the exit code, and one `error:` line for a failure
/// (for work before parsing, such as adding a plugin's flags). `app` answers --help.
int guard(const std::function<void()>& body, CLI::App* app = nullptr);

}  // namespace lmkit
