// Errors: one exception type carrying what went wrong and whose fault it is.
// Apps turn it into one `error: ...` line and an exit code (docs/architecture.md, core/).
#pragma once

#include <stdexcept>
#include <string>

namespace lmkit {

/// Exit codes shared by every app.
enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,  ///< the input was fine but the work failed
  kInput = 2,    ///< usage, config or input error: the user can fix it
  kInterrupted = 3,  ///< stopped by SIGTERM/SIGINT after writing a checkpoint: continue with --resume
};

/// The one exception type of lmkit. The message names the file, key or value at fault.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

/// Bad input: a missing or malformed file, a misspelt key, an out-of-range value (exit 2).
inline Error InputError(const std::string& message) { return Error(ExitCode::kInput, message); }
/// A failure while doing valid work: I/O, a non-finite loss, ... (exit 1).
inline Error RuntimeError(const std::string& message) { return Error(ExitCode::kRuntime, message); }

/// Throws InputError(message) unless cond holds.
inline void check_input(bool cond, const std::string& message) {
  if (!cond) throw InputError(message);
}

}  // namespace lmkit
