// bf16 autocast as an RAII guard (LibTorch 1.13 has none in C++): matmuls and
// linear layers run in bf16, parameters and norms stay float32 (master weights).
#pragma once

#include <c10/core/Device.h>

namespace lmkit {

class AutocastGuard {
 public:
  /// Enables bf16 autocast for `device` while alive when `enabled`; otherwise does nothing.
  AutocastGuard(c10::Device device, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false, cuda_ = false, previous_ = false;
};

}  // namespace lmkit
