// Shared by the libFuzzer harnesses (docs/fuzzing.md). A harness feeds bytes to one
// reader: an lmkit::Error is the reader's answer to bad input and passes; any
// other exception (a raw LibTorch, nlohmann or std:: message, which the apps turn
// into exit 1) aborts, so the fuzzer reports it as a finding next to the
// sanitizers' crashes, leaks and undefined behaviour.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "lmkit/core/error.h"

namespace lmkit::fuzz {

template <typename F>
void expect_input_errors(F&& body) {
  try {
    body();
  } catch (const lmkit::Error&) {
    // A named input or runtime error: the contract.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception that is not lmkit::Error escaped: %s\n", e.what());
    std::abort();
  }
}

/// The harness's scratch directory: $LMKIT_FUZZ_SCRATCH (scripts/fuzz.sh makes one per
/// run and removes it), else /dev/shm (or the temp dir) / lmkit-fuzz-PID, made once. Both
/// names have the same length whatever the process: the paths end up in error messages,
/// and a message one character longer took other branches (CI's fixed-seed fuzz step
/// reached one edge more once the process ids had five digits).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    if (const char* given = std::getenv("LMKIT_FUZZ_SCRATCH"); given && *given) return std::filesystem::path(given);
    const std::filesystem::path shm = "/dev/shm";
    std::string id = std::to_string(::getpid());
    id.insert(0, id.size() < 10 ? 10 - id.size() : 0, '0');
    auto p = (std::filesystem::exists(shm) ? shm : std::filesystem::temp_directory_path()) / ("lmkit-fuzz-" + id);
    std::filesystem::create_directories(p);
    return p;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Splits fuzz input into `n` parts at a separator line "\n--8<--\n" (the seeds use it
/// between files); missing parts are empty.
inline std::vector<std::string_view> split_parts(std::string_view data, size_t n) {
  static constexpr std::string_view kSep = "\n--8<--\n";
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < n) {
    const auto at = data.find(kSep);
    if (at == std::string_view::npos) break;
    parts.push_back(data.substr(0, at));
    data.remove_prefix(at + kSep.size());
  }
  parts.push_back(data);
  parts.resize(n);
  return parts;
}

}  // namespace lmkit::fuzz
