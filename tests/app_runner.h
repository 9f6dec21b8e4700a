// Runs an lmkit app as a user would: a shell command, its exit code and output.
#pragma once

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

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

}  // namespace lmkit::test
