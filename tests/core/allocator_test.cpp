#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <fstream>
#include <iterator>
#include <string>

#include "lmkit/core/allocator.h"

using namespace lmkit;

TEST_CASE("caching CPU allocator: a freed large block is handed to the next tensor of its size",
          "[core][allocator]") {
  install_caching_cpu_allocator();
  release_cached_cpu_memory();
  const int64_t n = 3 << 20;  // 12 MiB of floats
  void* first = nullptr;
  {
    at::Tensor a = at::full({n}, 2.0f);
    first = a.data_ptr();
    CHECK(cpu_cache_stats().live_bytes >= static_cast<size_t>(n) * 4);
  }
  CHECK(cpu_cache_stats().cached_bytes >= static_cast<size_t>(n) * 4);
  const size_t hits = cpu_cache_stats().hits;
  at::Tensor b = at::ones({n - 1000});  // slightly smaller: the same block still fits
  CHECK(b.data_ptr() == first);
  CHECK(cpu_cache_stats().hits == hits + 1);
  CHECK(b.sum().item<double>() == Approx(static_cast<double>(n - 1000)));  // no stale contents leak through
  at::Tensor c = at::zeros({n});  // the block is taken: a new one
  CHECK(c.data_ptr() != first);
  // A block much larger than asked for is not handed out.
  void* large = c.data_ptr();
  c = at::Tensor();  // its 12 MiB block goes back to the cache
  at::Tensor quarter = at::ones({n / 4});
  CHECK(quarter.data_ptr() != large);
  // Small tensors bypass the cache.
  const size_t misses = cpu_cache_stats().misses;
  at::Tensor small = at::ones({100});
  CHECK(small.sum().item<double>() == 100.0);
  CHECK(cpu_cache_stats().misses == misses);
}

TEST_CASE("caching CPU allocator: the limit bounds what stays cached", "[core][allocator]") {
  install_caching_cpu_allocator();
  release_cached_cpu_memory();
  set_cpu_cache_limit(size_t{20} << 20);
  {
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(at::empty({(2 + i) << 20}));  // 8, 12, 16, 20 MiB
  }
  CHECK(cpu_cache_stats().cached_bytes <= (size_t{20} << 20));
  CHECK(cpu_cache_stats().cached_bytes > 0);
  release_cached_cpu_memory();
  CHECK(cpu_cache_stats().cached_bytes == 0);
  set_cpu_cache_limit(size_t{4} << 30);
}

TEST_CASE("caching CPU allocator: a block no request takes for a long time is released", "[core][allocator]") {
  install_caching_cpu_allocator();
  release_cached_cpu_memory();
  { at::Tensor rare = at::empty({8 << 20}); }  // 32 MiB, cached on free
  REQUIRE(cpu_cache_stats().cached_bytes >= (size_t{32} << 20));
  for (int i = 0; i < 9000; ++i) at::Tensor busy = at::empty({1 << 19});  // 2 MiB, reused every time
  CHECK(cpu_cache_stats().cached_bytes < (size_t{32} << 20));
}

TEST_CASE("caching CPU allocator: a block larger than the memory left is refused as out of memory, not mapped",
          "[core][allocator]") {
  install_caching_cpu_allocator();
  std::ifstream meminfo("/proc/meminfo");
  const std::string text((std::istreambuf_iterator<char>(meminfo)), std::istreambuf_iterator<char>());
  auto kib = [&](const std::string& key) {
    const auto at = text.find(key + ":");
    return at == std::string::npos ? int64_t{0} : std::stoll(text.substr(at + key.size() + 1));
  };
  const int64_t total = kib("MemTotal"), available = kib("MemAvailable") + kib("SwapFree");
  REQUIRE(total > 0);
  REQUIRE(available > 0);
  // Between what is left and what the machine has: the kernel maps it (its overcommit heuristic
  // refuses only more than RAM and swap), and writing it would end in its out-of-memory killer.
  const int64_t floats = (available + (total + kib("SwapFree") - available) / 2) * 1024 / 4;
  try {
    at::Tensor t = at::empty({floats});
    FAIL("a tensor of " << floats * 4 / (1 << 20) << " MiB was allocated with " << available / 1024 << " MiB left");
  } catch (const c10::OutOfMemoryError& e) {
    CHECK_THAT(std::string(e.what_without_backtrace()),
               Catch::Contains("tried to allocate ") && Catch::Contains(" MiB of this machine's memory left"));
  }
  // What fits is allocated as before.
  at::Tensor fits = at::ones({int64_t{32} << 20});  // 128 MiB
  CHECK(fits.sum().item<double>() == Approx(32.0 * (1 << 20)));
}
