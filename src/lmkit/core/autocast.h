// bf16 autocast as an RAII guard (LibTorch has none in C++): matmuls and
// linear layers run in bf16, parameters and norms stay float32 (master weights).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace lmkit {

class AutocastGuard {
 public:
  /// Enables bf16 autocast for `device` while alive when `enabled`; otherwise does nothing.
  AutocastGuard(c10::Device device, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false, previous_ = false;
  c10::DeviceType device_type_;
  c10::ScalarType previous_dtype_ = c10::kBFloat16;
};

}  // namespace lmkit
