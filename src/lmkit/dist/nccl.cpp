// The NCCL process group: libtorch_cuda's c10d class, created in lmkit's CUDA module
// (src/cuda/cuda_module.cpp), which is built with NCCL when CMake found a CUDA LibTorch and
// nccl.h (the nvidia-nccl wheel's, or the CUDA toolkit's); otherwise asking for NCCL is a
// clear error.
#include <ATen/ATen.h>

#include "../../cuda/cuda_api.h"
#include "lmkit/core/error.h"
#include "lmkit/dist/backends.h"
#include "lmkit/dist/group.h"

namespace lmkit::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout, c10::Device device) {
  if (!nccl_available()) {
    throw RuntimeError("this lmkit was built without NCCL (it needs a CUDA LibTorch and nccl.h at build time): use --backend gloo");
  }
  return lmkit::detail::cuda_module().make_nccl(store, rank, size, timeout, device.index());
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
