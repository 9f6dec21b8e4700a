#include "lmkit/tasks/suite_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"

extern char** environ;

namespace lmkit::tasks {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:+,") == std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::string command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& x : argv) line += (line.empty() ? "" : " ") + shell_quote(x);
  return line;
}

namespace {

// The last "error: ..." line a failed app wrote to its log.
std::string error_line(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.rfind("error: ", 0) == 0) last = line.substr(7);
  }
  return last;
}

}  // namespace

namespace {

// SIGTERM/SIGINT to the suite: passed on to the running app (which checkpoints and exits),
// then the suite stops with exit 3; a later call goes on where it stopped.
std::atomic<int> stop_signal{0};
std::atomic<pid_t> running_child{0};

extern "C" void on_suite_stop(int sig) {
  stop_signal = sig;
  const pid_t child = running_child.load();
  if (child > 0) ::kill(child, sig);
}

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_suite_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

void stop_if_signalled(const std::string& what) {
  if (const int sig = stop_signal.load()) {
    throw Error(ExitCode::kInterrupted, std::string("lmkit-suite: stopped by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                                            " during " + what + "; call it again to go on (finished runs are kept)");
  }
}

// Runs one app with stdout and stderr appended to `log`; an app's failure is the suite's, with its error line.
void run_app_logged(std::vector<std::string> argv, const std::string& log, const std::string& what) {
  // The suite's plugins go to every run it starts: a plugin's task or family is theirs too.
  for (auto it = loaded_plugins().rbegin(); it != loaded_plugins().rend(); ++it) argv.insert(argv.begin() + 1, {"--plugin", *it});
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError(log + ": cannot write the log (" + std::strerror(errno) + ")");
  const std::string header = "$ " + command_line(argv) + "\n";
  if (::write(fd, header.data(), header.size()) < 0) std::perror(log.c_str());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& x : argv) args.push_back(const_cast<char*>(x.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  stop_if_signalled(what);
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fd);
  if (rc != 0) throw RuntimeError(argv[0] + ": cannot start (" + std::strerror(rc) + ")");
  running_child = pid;
  if (stop_signal.load()) ::kill(pid, stop_signal.load());  // a signal between the spawn and the line above
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  running_child = 0;
  stop_if_signalled(what);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string app = fs::path(argv[0]).filename().string();
  if (WIFSIGNALED(status)) throw RuntimeError(what + ": " + app + " ended by signal " + std::to_string(WTERMSIG(status)) + " (log: " + log + ")");
  const std::string why = error_line(log);
  const std::string message = what + ": " + app + " failed" + (why.empty() ? "" : ": " + why) + " (log: " + log + ")";
  throw WEXITSTATUS(status) == 2 ? InputError(message) : RuntimeError(message);
}

// The apps beside this one (build/bin/lmkit-finetune, lmkit-evaluate).
std::string sibling_app(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path app = (ec ? fs::path(".") : self.parent_path()) / name;
  if (!fs::exists(app)) throw RuntimeError(app.string() + ": not found (lmkit-suite runs the apps built beside it)");
  return app.string();
}

}  // namespace lmkit::tasks
