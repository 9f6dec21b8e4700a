#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>

#include "lmkit/core/cuda.h"

// LibTorch decides at its first CUDA question whether it has CUDA (core/cuda.h). A run that
// may reach a [cuda] case after a CPU one — no test named, or an argument that names CUDA
// ("[cuda]", a case's name) — loads lmkit's CUDA module first; one CPU case alone, as CTest
// runs them, does not load it.
int main(int argc, char* argv[]) {
  bool cuda = argc == 1;
  for (int i = 1; i < argc; ++i) cuda = cuda || ::strcasestr(argv[i], "cuda") != nullptr;
  if (cuda && lmkit::cuda_module_built()) {
    try {
      (void)lmkit::cuda_available();
    } catch (const std::exception& e) {
      std::cerr << "warning: " << e.what() << "\n";  // the [cuda] cases report it
    }
  }
  return Catch::Session().run(argc, argv);
}
