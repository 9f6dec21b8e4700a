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

/// A data-parallel rank other than 0 stopping because rank 0 failed (dist::leader_only): rank 0's
/// `error:` line says why, so the apps exit with rank 0's code and print nothing of their own.
class FollowerStop : public Error {
 public:
  explicit FollowerStop(ExitCode code) : Error(code, "rank 0 failed (its error: line says why)") {}
};

/// A rank other than 0 of a data-parallel job on one node reads the same command line, environment
/// and files as rank 0 until training starts: an input error it finds then is rank 0's too, which
/// rank 0 reports. While `quiet` holds, guard() (core/app.h) returns such an error's exit code (2) without its
/// line, so the job prints it once (dist::quiet_follower_input_errors sets it; the trainer clears it
/// before its first step, whose batches differ by rank).
void set_follower_quiet(bool quiet);

/// Throws InputError(message) unless cond holds.
inline void check_input(bool cond, const std::string& message) {
  if (!cond) throw InputError(message);
}

}  // namespace lmkit
