#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "lmkit/core/cuda.h"

// LibTorch decides at its first CUDA question whether it has CUDA (core/cuda.h). A run whose
// selection holds a [cuda] case (no test named, "[cuda]", a tag such as "[packing]" that a
// [cuda] case also has) loads lmkit's CUDA module before any case runs, so that a CPU case
// asking first cannot turn CUDA off; a run of CPU cases alone, as CTest runs them, does not.
namespace {

bool selects_cuda(Catch::Session& session) {
  const auto& config = session.config();
  for (const auto& test : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config)) {
    for (const auto& tag : test.getTestCaseInfo().lcaseTags) {
      if (tag == "cuda") return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int bad = session.applyCommandLine(argc, argv)) return bad;
  if (lmkit::cuda_module_built() && selects_cuda(session)) {
    try {
      (void)lmkit::cuda_available();
    } catch (const std::exception& e) {
      std::cerr << "warning: " << e.what() << "\n";  // the [cuda] cases report it
    }
  }
  return session.run();
}
