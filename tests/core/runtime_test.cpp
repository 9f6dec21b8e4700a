#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <thread>

#include "lmkit/core/error.h"
#include "lmkit/core/runtime.h"

TEST_CASE("runtime: device parsing", "[core][runtime]") {
  CHECK(lmkit::parse_device("cpu").is_cpu());
  CHECK_THROWS_WITH(lmkit::parse_device("gpu"), Catch::Contains("expected cpu, cuda or cuda:N"));
  CHECK_THROWS_WITH(lmkit::parse_device("cuda:x"), Catch::Contains("expected cpu, cuda or cuda:N"));
  CHECK_THROWS_WITH(lmkit::parse_device("cuda0"), Catch::Contains("expected cpu, cuda or cuda:N"));
  if (torch::cuda::is_available()) {
    CHECK(lmkit::parse_device("cuda").is_cuda());
    CHECK_THROWS_WITH(lmkit::parse_device("cuda:999"), Catch::Contains("CUDA device(s) visible"));
  } else {
    CHECK_THROWS_WITH(lmkit::parse_device("cuda"), Catch::Contains("CUDA is not available"));
    CHECK_THROWS_AS(lmkit::parse_device("cuda:1"), lmkit::Error);
  }
}

TEST_CASE("runtime: thread count defaults to every core", "[core][runtime]") {
  const int before = at::get_num_threads();
  CHECK(lmkit::set_threads(0) == static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(at::get_num_threads() == static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(lmkit::set_threads(1) == 1);
  CHECK(at::get_num_threads() == 1);
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

TEST_CASE("runtime: the loaded BLAS is identified from the process maps", "[core][runtime]") {
  at::mm(at::randn({8, 8}), at::randn({8, 8}));  // make sure BLAS is in use
  const std::string blas = lmkit::blas_library();
  INFO(blas);
  // scripts/setup.sh selects the OpenMP OpenBLAS; anything else here means the setup was skipped.
  CHECK(blas == "openblas-openmp");
}
