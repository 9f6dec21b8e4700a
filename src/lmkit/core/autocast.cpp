#include "lmkit/core/autocast.h"

#include <ATen/autocast_mode.h>

namespace lmkit {

AutocastGuard::AutocastGuard(c10::Device device, bool enabled) : active_(enabled), device_type_(device.type()) {
  if (!active_) return;
  previous_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Leaving the outermost region drops the cast-weight cache, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace lmkit
