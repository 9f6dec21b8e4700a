#include "lmkit/core/runtime.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <iostream>
#include <malloc.h>  // mallinfo2
#include <mutex>
#include <thread>
#include <vector>

#include "lmkit/core/allocator.h"
#include "lmkit/core/cuda.h"
#include "lmkit/core/error.h"

namespace lmkit {

std::optional<std::string> out_of_memory(const c10::Error& e) {
  const std::string what = e.what_without_backtrace();
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) == nullptr && what.find("can't allocate memory") == std::string::npos) {
    return std::nullopt;
  }
  const auto at = what.find("tried to allocate ");
  if (at == std::string::npos) return what.substr(0, std::min<size_t>(what.find('\n'), 200));
  const auto end = what.find_first_of(".(\n", at);
  return what.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

c10::Device parse_device(const std::string& spec) {
  if (spec == "cpu") return c10::Device(c10::kCPU);
  if (spec.rfind("cuda", 0) != 0) {
    throw InputError("--device '" + spec + "': expected cpu, cuda or cuda:N");
  }
  int64_t index = 0;
  if (spec.size() > 4) {
    const std::string digits = spec.substr(5);
    if (spec[4] != ':' || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
      throw InputError("--device '" + spec + "': expected cpu, cuda or cuda:N");
    }
    index = std::stoll(digits);
  }
  if (!cuda_module_built()) {  // the installation's lack, as a machine's missing GPU is: exit 1
    throw RuntimeError("--device '" + spec + "': this lmkit was built without CUDA (against a CPU LibTorch, or as a sanitizer build)");
  }
  if (!cuda_available()) {
    throw RuntimeError("--device '" + spec + "': no CUDA device is available on this machine (no GPU or NVIDIA driver visible)");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (index >= count) {
    throw InputError("--device '" + spec + "': only " + std::to_string(count) + " CUDA device(s) visible");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

int resolve_threads(int n) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // 100000 threads took minutes before printing anything; past a few per core, more only adds contention.
  const int most = 4 * cores;
  const auto refuse = [&](const std::string& what) {
    return InputError(what + ": at most " + std::to_string(most) + " (4 per core; this machine has " +
                      std::to_string(cores) + "): more threads than that only slow every step down");
  };
  if (n > most) throw refuse("--threads " + std::to_string(n));
  if (n > 0) return n;
  // The default: OMP_NUM_THREADS where it is set, as LibTorch reads it (torchrun sets 1 for each of
  // several ranks on a machine, and a scheduler's job gets its share), else every core. OpenMP's
  // form "N" or "N,M,..." (a count per nesting level: the first is this level's).
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!env || !*env) return cores;
  const std::string v(env);
  const std::string first = v.substr(0, v.find(','));
  if (first.empty() || first.size() > 9 || first.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(first) < 1) {
    throw InputError("environment variable OMP_NUM_THREADS='" + v.substr(0, 40) +
                     "' is not a thread count (a positive integer; unset it for every core, or pass --threads)");
  }
  const int threads = std::stoi(first);
  if (threads > most) throw refuse("OMP_NUM_THREADS=" + first);
  return threads;
}

int set_threads(int n) {
  n = resolve_threads(n);
  at::set_num_threads(n);
  return n;
}

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void seed_everything(uint64_t seed) {
  if (cuda_module_loaded()) {
    torch::manual_seed(seed);  // the CPU generator and every CUDA one
  } else {
    // The CPU generator alone: torch::manual_seed asks LibTorch about CUDA, which before lmkit's
    // CUDA module is loaded turns CUDA off for the process (core/cuda.h).
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  std::srand(static_cast<unsigned>(derive_seed(seed, 0)));
}

double measure_gemm_gflops(int64_t n, double seconds, c10::Device device) {
  at::NoGradGuard no_grad;
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor a = at::randn({n, n}, opts), b = at::randn({n, n}, opts), c = at::empty({n, n}, opts);
  auto sync = [&] {
    if (device.is_cuda()) c.cpu();
  };
  at::mm_out(c, a, b);  // warm-up: thread pool, BLAS buffers
  sync();
  std::vector<double> rates;
  const auto start = std::chrono::steady_clock::now();
  do {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    sync();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * n * n * n / dt / 1e9);
  } while (rates.size() < 3 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds);
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
  return rates[rates.size() / 2];
}

namespace {

// The names in a comma-separated environment variable, read once.
std::vector<std::string> env_names(const char* variable) {
  std::vector<std::string> out;
  const char* env = std::getenv(variable);
  std::string item;
  for (const char* c = env ? env : "";; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!item.empty()) out.push_back(item);
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  return out;
}

}  // namespace

bool lever_disabled(const std::string& name) {
  static const std::vector<std::string> disabled = env_names("LMKIT_DISABLE");
  return std::find(disabled.begin(), disabled.end(), name) != disabled.end();
}

bool lever_enabled(const std::string& name) {
  static const std::vector<std::string> enabled = env_names("LMKIT_ENABLE");
  return std::find(enabled.begin(), enabled.end(), name) != enabled.end();
}

// --deterministic: LibTorch's deterministic kernels, and an error for an op that has none (never a
// silently nondeterministic run); on CUDA also cuDNN's deterministic algorithms without autotuning,
// and the fixed cuBLAS workspace deterministic cuBLAS needs (set before the first cuBLAS handle,
// unless the user set one).
static void set_deterministic() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

c10::Device init_runtime(const RuntimeOptions& options) {
  // The device first: a CUDA one loads lmkit's CUDA module before anything asks LibTorch about CUDA (core/cuda.h).
  c10::Device device = parse_device(options.device);
  if (!lever_disabled("allocator")) install_caching_cpu_allocator();
  if (options.deterministic) set_deterministic();
  set_threads(options.threads);
  seed_everything(options.seed);
  if (device.is_cpu()) {
    const std::string blas = blas_library();
    if (blas == "reference" || blas == "openblas-pthread") {
      const double gflops = measure_gemm_gflops(512, 0.05);
      std::cerr << "warning: LibTorch uses the " << blas << " BLAS (fp32 matmul at " << static_cast<int>(gflops)
                << " GFLOP/s); install libopenblas0-openmp and select it (scripts/setup.sh)\n";
    }
  }
  return device;
}

std::string blas_library() {
  // A LibTorch built with MKL (PyPI's wheel) links it statically: it never shows in the maps.
  if (at::hasMKL()) return "mkl";
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("libblas.so") == std::string::npos && path.find("libopenblas") == std::string::npos) continue;
    if (path.find("openblas-openmp") != std::string::npos) return "openblas-openmp";
    if (path.find("openblas-pthread") != std::string::npos) return "openblas-pthread";
    if (path.find("/blas/") != std::string::npos) return "reference";
    return path;
  }
  return "";
}

bool cpu_has_bf16() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
    }
  }
  return false;
}

namespace {

double status_field_mib(const std::string& field) {  // e.g. "VmHWM:", reported in kB
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(field.size())) / 1024.0;
  }
  return 0.0;
}

}  // namespace

double peak_rss_mib() { return status_field_mib("VmHWM:"); }

double current_rss_mib() { return status_field_mib("VmRSS:"); }

double heap_in_use_mib() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1024.0 * 1024.0);
#else
  return -1.0;
#endif
}

}  // namespace lmkit
