#include "lmkit/core/allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace lmkit {

namespace {

constexpr size_t kMinCached = size_t{1} << 20;  // smaller blocks: the C allocator

// Cached blocks come in size classes of 1/8 octave (at most 12.5% larger than asked
// for), so tensors whose size varies a little from step to step — the masked-LM
// rows, a batch's padded length — share blocks instead of each size adding its own.
size_t size_class(size_t n) {
  int octave = 0;
  while ((size_t{2} << octave) <= n) ++octave;  // 2^octave <= n < 2^(octave+1)
  const size_t step = size_t{1} << (octave - 3);
  return (n + step - 1) / step * step;
}

constexpr size_t kMinChecked = size_t{64} << 20;  // larger new blocks: checked against the memory left

// A number from /proc/meminfo ("MemAvailable:   12345 kB"), in bytes; 0 when absent.
size_t meminfo_bytes(const std::string& text, const std::string& key) {
  const auto at = text.find(key + ":");
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size() + 1)) * 1024;
}

// What a new block may take: the memory the kernel says it can still give (MemAvailable,
// page cache it can drop included, and free swap), and under a cgroup v2 limit (a
// container's) what the limit leaves. SIZE_MAX when neither can be read.
size_t memory_available() {
  size_t available = std::numeric_limits<size_t>::max();
  try {
    std::ifstream meminfo("/proc/meminfo");
    const std::string text((std::istreambuf_iterator<char>(meminfo)), std::istreambuf_iterator<char>());
    if (text.find("MemAvailable:") != std::string::npos) {
      available = meminfo_bytes(text, "MemAvailable") + meminfo_bytes(text, "SwapFree");
    }
    std::ifstream max("/sys/fs/cgroup/memory.max"), current("/sys/fs/cgroup/memory.current");
    std::string limit;
    size_t used = 0;
    if (max >> limit && limit != "max" && current >> used) {
      const size_t cap = std::stoull(limit);
      available = std::min(available, cap > used ? cap - used : 0);
    }
  } catch (const std::exception&) {  // an unreadable figure checks nothing
  }
  return available;
}

// A block larger than the memory left would be taken page by page as it is written, until the
// kernel's out-of-memory killer ends the process (SIGKILL, no line: a config's size mistyped
// by a few digits, an --batch-size meant for a GPU). Refused here instead, as LibTorch's
// own allocator refuses what the kernel will not map.
void check_memory_left(size_t size) {
  if (size < kMinChecked) return;
  const size_t available = memory_available();
  TORCH_CHECK_WITH(OutOfMemoryError, size <= available, "tried to allocate ", size >> 20, " MiB with ", available >> 20,
                   " MiB of this machine's memory left");
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  static CachingCpuAllocator& instance() {
    static auto* allocator = new CachingCpuAllocator();  // never destroyed: tensors may outlive main
    return *allocator;
  }

  c10::DataPtr allocate(size_t n) override {
    void* p = take(n);
    // Small blocks skip the cache's lock on free.
    return {p, p, n < kMinCached ? &c10::free_cpu : &release_block, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
    trim(limit_);
  }

  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    trim(0);
  }

 private:
  static void release_block(void* p) {
    if (p != nullptr) instance().give_back(p);
  }

  void* take(size_t n) {
    if (n < kMinCached) return n == 0 ? nullptr : c10::alloc_cpu(n);
    const size_t size = size_class(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++clock_;
      // The smallest cached block that fits, if it is at most two classes (~25%) larger.
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 4) {
        void* p = it->second.block;
        const size_t got = it->first;
        free_.erase(it);
        stats_.cached_bytes -= got;
        stats_.live_bytes += got;
        ++stats_.hits;
        live_[p] = got;
        return p;
      }
      ++stats_.misses;
    }
    void* p = nullptr;
    try {
      check_memory_left(size);
      p = c10::alloc_cpu(size);
    } catch (const c10::Error&) {
      release_all();  // out of memory: give the cache back and try once more
      check_memory_left(size);
      p = c10::alloc_cpu(size);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    live_[p] = size;
    stats_.live_bytes += size;
    return p;
  }

  void give_back(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) {  // a small block freed through raw_deleter()
      c10::free_cpu(p);
      return;
    }
    const size_t size = it->second;
    live_.erase(it);
    stats_.live_bytes -= size;
    if (size > limit_) {
      c10::free_cpu(p);
      return;
    }
    trim(limit_ - size);
    free_.emplace(size, Cached{p, clock_});
    stats_.cached_bytes += size;
    if (++frees_ % 256 == 0) evict_idle();
  }

  // Releases cached blocks no request has wanted for kIdle large allocations: the
  // sizes a run met once (an unusually long batch, a rare masked-token count) do
  // not stay cached for the rest of it. Holds mutex_.
  void evict_idle() {
    for (auto it = free_.begin(); it != free_.end();) {
      if (clock_ - it->second.freed_at > kIdle) {
        stats_.cached_bytes -= it->first;
        c10::free_cpu(it->second.block);
        it = free_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Frees cached blocks, smallest first, until at most `target` bytes stay cached. Holds mutex_.
  void trim(size_t target) {
    while (stats_.cached_bytes > target && !free_.empty()) {
      auto it = free_.begin();
      stats_.cached_bytes -= it->first;
      c10::free_cpu(it->second.block);
      free_.erase(it);
    }
  }

  struct Cached {
    void* block;
    uint64_t freed_at;  // clock_ when it was freed
  };
  static constexpr uint64_t kIdle = 8192;

  std::mutex mutex_;
  std::multimap<size_t, Cached> free_;       // size -> cached block
  uint64_t clock_ = 0, frees_ = 0;           // large allocations and frees so far
  std::unordered_map<void*, size_t> live_;   // cached-size blocks held by tensors
  size_t limit_ = size_t{4} << 30;
  CpuCacheStats stats_;
};

std::once_flag installed;
std::atomic<bool> is_installed{false};

}  // namespace

void install_caching_cpu_allocator() {
  std::call_once(installed, [] {
    c10::SetCPUAllocator(&CachingCpuAllocator::instance(), /*priority=*/100);
    is_installed = true;
  });
}

CpuCacheStats cpu_cache_stats() { return is_installed ? CachingCpuAllocator::instance().stats() : CpuCacheStats{}; }

void set_cpu_cache_limit(size_t bytes) { CachingCpuAllocator::instance().set_limit(bytes); }

void release_cached_cpu_memory() { CachingCpuAllocator::instance().release_all(); }

}  // namespace lmkit
