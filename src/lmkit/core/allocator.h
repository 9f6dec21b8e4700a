// A caching CPU allocator for LibTorch's tensors.
//
// glibc returns blocks above 32 MiB to the kernel on free (mmap), and no setting
// raises that ceiling, so every training step page-faults and zeroes its large
// buffers again: the logits of a language-model head are 4096 x 8000 floats
// (131 MB) at batch 32 x 128, and the kernel's page clearing was a quarter of a
// gpt-mini step. This allocator keeps freed blocks of 1 MiB and more and hands
// them back for the next request of (nearly) the same size, as PyTorch's CUDA
// caching allocator does on the GPU: sizes are rounded to 1/8-octave classes, a
// request takes the smallest cached block up to ~25% larger, and blocks no
// request has taken for 8,192 large allocations are released. Smaller blocks go
// to the C allocator.
#pragma once

#include <cstddef>

namespace lmkit {

/// Makes the caching allocator LibTorch's CPU allocator (once; later calls do
/// nothing). Called by init_runtime. Tensors allocated before keep their own
/// deleter, so installing it at any time is safe.
void install_caching_cpu_allocator();

struct CpuCacheStats {
  size_t live_bytes = 0;    ///< in blocks of >= 1 MiB held by tensors now
  size_t cached_bytes = 0;  ///< freed blocks kept for reuse
  size_t hits = 0, misses = 0;
};

/// Figures of the caching allocator (zeros when it is not installed).
CpuCacheStats cpu_cache_stats();

/// Most bytes the cache keeps in freed blocks (default 4 GiB); when a free would
/// exceed it, the smallest cached blocks are released first.
void set_cpu_cache_limit(size_t bytes);

/// Gives every cached block back to the C allocator.
void release_cached_cpu_memory();

}  // namespace lmkit
