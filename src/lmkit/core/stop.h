// Stop signals: SIGTERM/SIGINT while an app does long work (training, evaluation,
// generation). The first asks the work to stop at its next check — between
// batches, or between decoding steps — and a second ends the process at once,
// as the default action would. Cluster schedulers send SIGTERM before they preempt
// a job, so every long loop checks (docs/training.md, Guarantees).
#pragma once

#include <signal.h>

#include <string>

#include "lmkit/core/error.h"

namespace lmkit {

/// While one exists, SIGTERM and SIGINT set the stop flag instead of ending the
/// process. Nestable: the outermost one installs the handlers, clears the flag,
/// and restores the earlier handlers when it goes.
///
///   StopSignals signals;
///   for (auto& batch : batches) { check_stop("generation"); ... }
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// The signal that asked to stop (SIGTERM or SIGINT), or 0.
  static int received();
  /// "SIGTERM", "SIGINT", or "a signal" for another number.
  static std::string name(int sig);
};

/// What a loop throws when a stop signal arrived: ExitCode::kInterrupted (exit 3).
class Interrupted : public Error {
 public:
  Interrupted(int sig, const std::string& during);
  int signal() const { return signal_; }
  const std::string& during() const { return during_; }

 private:
  int signal_;
  std::string during_;
};

/// Throws Interrupted when a stop signal arrived under a StopSignals and stop
/// checks are not held off (NoStopChecks); otherwise does nothing. `during` names
/// the work ("generation", "dev evaluation") for the message.
void check_stop(const char* during);

/// The phase check_stop names while a finetuning or evaluation set is read and tokenized
/// (every task's reader and dataset checks under it, so the message is one).
inline constexpr const char kPreparingExamples[] = "the preparation of the examples";

/// Whether check_stop would throw now: for work that must first wind down (worker threads joined).
bool stop_pending();

/// Holds check_stop off while it exists: work every data-parallel rank must finish
/// together (a collective would hang if one rank left it). The flag stays set, and
/// the caller decides when all ranks stop.
class NoStopChecks {
 public:
  NoStopChecks();
  ~NoStopChecks();
  NoStopChecks(const NoStopChecks&) = delete;
  NoStopChecks& operator=(const NoStopChecks&) = delete;
};

}  // namespace lmkit
