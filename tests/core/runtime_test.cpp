#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "lmkit/core/cuda.h"
#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"
#include "test_util.h"

TEST_CASE("runtime: device parsing", "[core][runtime]") {
  CHECK(lmkit::parse_device("cpu").is_cpu());
  CHECK_THROWS_WITH(lmkit::parse_device("gpu"), Catch::Contains("expected cpu, cuda or cuda:N"));
  CHECK_THROWS_WITH(lmkit::parse_device("cuda:x"), Catch::Contains("expected cpu, cuda or cuda:N"));
  CHECK_THROWS_WITH(lmkit::parse_device("cuda0"), Catch::Contains("expected cpu, cuda or cuda:N"));
  if (lmkit::cuda_available()) {
    CHECK(lmkit::parse_device("cuda").is_cuda());
    CHECK_THROWS_WITH(lmkit::parse_device("cuda:999"), Catch::Contains("CUDA device(s) visible"));
  } else {
    // A CUDA LibTorch on a machine without a GPU says so (it said "built without CUDA").
    CHECK_THROWS_WITH(lmkit::parse_device("cuda"), Catch::Contains("no CUDA device is available on this machine") ||
                                                       Catch::Contains("this lmkit was built without CUDA"));
    CHECK_THROWS_AS(lmkit::parse_device("cuda:1"), lmkit::Error);
  }
}

TEST_CASE("runtime: thread count defaults to OMP_NUM_THREADS, else every core", "[core][runtime]") {
  const int before = at::get_num_threads();
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string saved_value = saved ? saved : "";
  // 100000 threads printed nothing for minutes: at most 4 per core.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(lmkit::resolve_threads(4 * cores) == 4 * cores);
  CHECK_THROWS_WITH(lmkit::resolve_threads(4 * cores + 1), Catch::Contains("4 per core"));
  unsetenv("OMP_NUM_THREADS");
  CHECK(lmkit::set_threads(0) == cores);
  CHECK(at::get_num_threads() == cores);
  CHECK(lmkit::set_threads(1) == 1);
  CHECK(at::get_num_threads() == 1);
  // torchrun's 1 a rank, OpenMP's nested form, and values that are no count.
  setenv("OMP_NUM_THREADS", "1", 1);
  CHECK(lmkit::resolve_threads(0) == 1);
  CHECK(lmkit::resolve_threads(3) == 3);  // the flag wins
  setenv("OMP_NUM_THREADS", "2,1", 1);
  CHECK(lmkit::resolve_threads(0) == 2);
  for (const char* bad : {"0", "-1", "two", " 2", "99999999999"}) {
    setenv("OMP_NUM_THREADS", bad, 1);
    CHECK_THROWS_WITH(lmkit::resolve_threads(0), Catch::Contains("OMP_NUM_THREADS"));
  }
  setenv("OMP_NUM_THREADS", std::to_string(4 * cores + 1).c_str(), 1);
  CHECK_THROWS_WITH(lmkit::resolve_threads(0), Catch::Contains("4 per core"));
  if (saved) setenv("OMP_NUM_THREADS", saved_value.c_str(), 1); else unsetenv("OMP_NUM_THREADS");
  lmkit::set_threads(before);
}

TEST_CASE("runtime: one seed makes LibTorch reproducible - derived seeds differ", "[core][runtime]") {
  lmkit::seed_everything(7);
  at::Tensor a = at::randn({16});
  lmkit::seed_everything(7);
  at::Tensor b = at::randn({16});
  lmkit::seed_everything(8);
  at::Tensor c = at::randn({16});
  CHECK(at::equal(a, b));
  CHECK_FALSE(at::equal(a, c));
  CHECK(lmkit::derive_seed(1, 0) != lmkit::derive_seed(1, 1));
  CHECK(lmkit::derive_seed(1, 0) != lmkit::derive_seed(2, 0));
  CHECK(lmkit::derive_seed(1, 5) == lmkit::derive_seed(1, 5));
}

TEST_CASE("runtime: the GEMM rate is measured and plausible", "[core][runtime]") {
  const double gflops = lmkit::measure_gemm_gflops(256, 0.02);
  CHECK(gflops > 0.1);
  CHECK(gflops < 1e5);
  CHECK(lmkit::peak_rss_mib() > 1.0);
}

TEST_CASE("runtime: the BLAS report agrees with LibTorch's build configuration", "[core][runtime]") {
  at::mm(at::randn({8, 8}), at::randn({8, 8}));  // make sure BLAS is in use
  const std::string blas = lmkit::blas_library();
  const std::string config = at::show_config();
  INFO("reported: '" << blas << "'; LibTorch: " << config);
  const auto info = config.find("BLAS_INFO=");
  REQUIRE(info != std::string::npos);
  const std::string built_with = config.substr(info + 10, config.find(',', info) - info - 10);
  if (built_with == "mkl") {
    CHECK(blas == "mkl");
  } else {
    // A LibTorch on a shared BLAS (a distribution's build): the library in the process maps.
    CHECK(blas != "mkl");
    CHECK_FALSE(blas.empty());
  }
}

TEST_CASE("runtime: std::filesystem binds to the system libstdc++, not LibTorch's private copy", "[core][runtime]") {
  // PyPI's libtorch.so exports an unversioned copy of std::filesystem that crashes when
  // called from outside it; CMakeLists.txt links libstdc++ ahead of LibTorch. RTLD_NEXT
  // looks the name up as this executable's own calls are bound: through the libraries it
  // loads, in their order, skipping the executable (a non-PIE one holds a PLT stub).
  void* symbol = dlsym(RTLD_NEXT, "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathE");
  REQUIRE(symbol != nullptr);
  Dl_info where{};
  REQUIRE(dladdr(symbol, &where) != 0);
  REQUIRE(where.dli_fname != nullptr);
  INFO(where.dli_fname);
  CHECK(std::string(where.dli_fname).find("libstdc++") != std::string::npos);
  lmkit::test::TempDir dir;
  std::filesystem::create_directories(dir / "a/b");
  CHECK(std::filesystem::remove_all(dir / "a") == 2);
}
