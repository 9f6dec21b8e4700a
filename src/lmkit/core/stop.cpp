#include "lmkit/core/stop.h"

#include <atomic>

namespace lmkit {

namespace {

std::atomic<int> stop_signal{0};
int signals_installed = 0;  // nesting depth of StopSignals (the main thread creates them)
int checks_held = 0;    // nesting depth of NoStopChecks
struct sigaction old_term {}, old_int {};

extern "C" void on_stop_signal(int sig) {
  if (stop_signal.exchange(sig) != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

StopSignals::StopSignals() {
  if (signals_installed++ > 0) return;
  stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write or read in progress goes on
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGINT, &sa, &old_int);
}

StopSignals::~StopSignals() {
  if (--signals_installed > 0) return;
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
}

int StopSignals::received() { return stop_signal.load(); }

std::string StopSignals::name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

Interrupted::Interrupted(int sig, const std::string& during)
    : Error(ExitCode::kInterrupted, "interrupted by " + StopSignals::name(sig) + " during " + during),
      signal_(sig),
      during_(during) {}

bool stop_pending() { return stop_signal.load() != 0 && signals_installed > 0 && checks_held == 0; }

void check_stop(const char* during) {
  if (stop_pending()) throw Interrupted(stop_signal.load(), during);
}

NoStopChecks::NoStopChecks() { ++checks_held; }
NoStopChecks::~NoStopChecks() { --checks_held; }

}  // namespace lmkit
