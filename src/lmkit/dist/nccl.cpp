// The NCCL process group (libtorch_cuda's c10d class). Compiled with NCCL only
// when CMake found a CUDA LibTorch and nccl.h (the nvidia-nccl wheel's, or the
// CUDA toolkit's); otherwise asking for NCCL is a clear error.
#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/dist/backends.h"

#ifdef LMKIT_WITH_NCCL
#define USE_C10D_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace lmkit::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout, c10::Device device) {
#ifdef LMKIT_WITH_NCCL
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout, (void)device;
  throw RuntimeError("this lmkit was built without NCCL (it needs a CUDA LibTorch and nccl.h at build time): use --backend gloo");
#endif
}

}  // namespace lmkit::dist::detail

namespace lmkit::dist {

bool nccl_available() {
#ifdef LMKIT_WITH_NCCL
  return true;
#else
  return false;
#endif
}

}  // namespace lmkit::dist
