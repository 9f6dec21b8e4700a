#include "lmkit/core/autocast.h"

#include <ATen/autocast_mode.h>

namespace lmkit {

AutocastGuard::AutocastGuard(c10::Device device, bool enabled) : active_(enabled), cuda_(device.is_cuda()) {
  if (!active_) return;
  if (cuda_) {
    previous_ = at::autocast::is_enabled();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
  } else {
    previous_ = at::autocast::is_cpu_enabled();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  }
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Leaving the outermost region drops the cast-weight cache, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) at::autocast::set_enabled(previous_);
  else at::autocast::set_cpu_enabled(previous_);
}

}  // namespace lmkit
