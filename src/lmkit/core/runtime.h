// Start-up shared by every app: thread count, device, seeding, and a check of
// the BLAS rate (Debian's LibTorch silently runs ~20x slower on reference BLAS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

namespace lmkit {

/// What every app's `--threads`, `--device` and `--seed` flags fill in.
struct RuntimeOptions {
  int threads = 0;             ///< 0: every core (LibTorch defaults to half of them on x86-64)
  std::string device = "cpu";  ///< cpu, cuda, cuda:N
  uint64_t seed = 42;
  bool deterministic = false;  ///< LibTorch's deterministic kernels only (docs/training.md, "What a seed fixes")
};

/// Parses `cpu`, `cuda`, `cuda:N`. Throws InputError when the device does not exist
/// here (CUDA not built in, no device visible, index out of range).
c10::Device parse_device(const std::string& spec);

/// For an allocation failure (CPU allocator, CUDA out of memory): a short account
/// ("tried to allocate N bytes"); nullopt for any other error.
std::optional<std::string> out_of_memory(const c10::Error& e);

/// A thread-count flag's value: n itself; for n <= 0 (the default of --threads everywhere)
/// OMP_NUM_THREADS where it is set (torchrun's 1 a rank), else every core. InputError above
/// 4 threads per core, or for an OMP_NUM_THREADS that is not a positive count.
int resolve_threads(int n);
/// Sets LibTorch's intra-op thread count; n <= 0 means resolve_threads' default. Returns the count set.
int set_threads(int n);

/// Seeds LibTorch (CPU and CUDA) and the C library RNG from one seed.
void seed_everything(uint64_t seed);

/// SplitMix64 mix of a seed with a stream index: independent, reproducible
/// sub-seeds, e.g. derive_seed(seed, epoch) for an epoch's shuffling.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

/// Whether a hand-made speed-up is switched off for this process, by name, in the
/// comma-separated LMKIT_DISABLE environment variable: "allocator" (the caching CPU
/// allocator), "dropout" (lmkit's CPU dropout, the attention weights' included:
/// at::dropout and LibTorch's attention kernel instead), "flash" (causal
/// attention masked in the kernel: an explicit causal bias instead), "chunked_ce"
/// (models::linear_cross_entropy: full logits, then cross-entropy), "fused" (lmkit's
/// fused CUDA kernels, nn/fused.h: ATen's composites instead) or "fused_prenorm" (on
/// the fused path, pre-norm stacks' residual sums handed to the next norm's kernel and
/// norms feeding linears written in bf16: each sum made and each output cast on its own) or
/// "varlen" (packed documents on a GPU through the varlen flash kernel: the T × T bias to
/// the efficient kernel instead). Each falls back
/// to what LibTorch does natively, with the same results up to rounding;
/// bench/levers.sh times every lever against its fallback.
bool lever_disabled(const std::string& name);

/// Whether an opt-in speed-up is switched on for this process, by name, in the
/// comma-separated LMKIT_ENABLE environment variable (none at present: "fused", opt-in
/// until its first GPU run, is now on unless LMKIT_DISABLE=fused).
bool lever_enabled(const std::string& name);

/// Installs the caching CPU allocator (install_caching_cpu_allocator), sets the
/// threads and seed, parses the device, and warns on stderr when LibTorch runs on
/// a slow BLAS (see blas_library()), quoting the measured GEMM rate.
/// Returns the device.
c10::Device init_runtime(const RuntimeOptions& options);

/// Measured fp32 (or other dtype) n x n GEMM rate on `device`, in GFLOP/s
/// (2n^3 flops per product), median over repetitions lasting about `seconds`.
double measure_gemm_gflops(int64_t n = 1024, double seconds = 0.3, c10::Device device = c10::kCPU);

/// The BLAS LibTorch runs matmuls on: "mkl" when LibTorch was built with MKL (linked
/// statically, as in PyPI's wheel); otherwise the one this process has mapped (from
/// /proc/self/maps): "openblas-openmp", "openblas-pthread", "reference", another
/// path, or "" when none is mapped.
/// Decided by what is loaded, not by timing, so a busy machine gives no false alarm.
std::string blas_library();

/// Below this fp32 GEMM rate on CPU, LibTorch is almost certainly on reference BLAS.
constexpr double kImplausibleGemmGflops = 20.0;

/// Whether this CPU has native bf16 dot products (avx512_bf16 or amx_bf16),
/// the condition under which bf16 autocast pays off on CPU (docs/benchmarks.md).
bool cpu_has_bf16();

/// Resident-set size high-water mark of this process, in MiB (from /proc/self/status).
double peak_rss_mib();

/// Resident-set size of this process now, in MiB (from /proc/self/status).
double current_rss_mib();

/// Bytes the C allocator has handed out and not yet freed, in MiB (glibc mallinfo2;
/// -1 elsewhere). Unlike the RSS it does not count freed memory kept for reuse, so
/// it is the figure that shows a leak.
double heap_in_use_mib();

}  // namespace lmkit
