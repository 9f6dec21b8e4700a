// Runs an lmkit app as a user would: a shell command, its exit code and output.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "test_util.h"

namespace lmkit::test {

struct Run {
  int code;
  std::string out;  // stdout and stderr
};

/// Runs a shell command line as it is (merge stderr with 2>&1 where wanted).
inline Run run_shell(const std::string& cmd) {
  std::array<char, 4096> buf{};
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WEXITSTATUS(status), out};
}

/// `cmd` with `FLAG VALUE`: the value replaced where the command gives FLAG already (the apps
/// refuse a one-value flag given twice), appended otherwise.
inline std::string with_flag(const std::string& cmd, const std::string& flag, const std::string& value) {
  const size_t at = (cmd + " ").find(" " + flag + " ");
  if (at == std::string::npos) return cmd + " " + flag + " " + value;
  const size_t start = at + flag.size() + 2, end = std::min(cmd.find(' ', start), cmd.size());
  return cmd.substr(0, start) + value + cmd.substr(end);
}

/// Runs `bin/ARGS` with stderr merged into the output.
inline Run run(const std::string& args) { return run_shell(test::bin_dir() + "/" + args + " 2>&1"); }

/// Starts `bin/ARGS` in the background, its output to `log`. When it ends its exit code is written
/// to `code_file` whole: beside it first, then renamed, so a reader never finds the file before the
/// code is in it. Returns the pid of the subshell that waits for the app (the app is its child:
/// signal it with `pkill -P PID`).
inline std::string start_app(const std::string& args, const std::string& log, const std::string& code_file) {
  std::string pid = run_shell("(" + test::bin_dir() + "/" + args + " > " + log + " 2>&1; echo $? > " + code_file +
                              ".part; mv " + code_file + ".part " + code_file + ") > /dev/null 2>&1 & echo $!")
                        .out;
  return pid.substr(0, pid.find('\n'));
}

/// Waits up to `seconds` for an app started by `start_app` to end; its exit code, or -1 if it has not.
inline int wait_exit_code(const std::string& code_file, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!std::filesystem::exists(code_file) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!std::filesystem::exists(code_file)) return -1;
  std::ifstream in(code_file);
  int code = -1;
  in >> code;
  return code;
}

}  // namespace lmkit::test
