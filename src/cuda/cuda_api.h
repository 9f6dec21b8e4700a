// The interface of lmkit's CUDA module (liblmkit_cuda.so, cuda_module.cpp beside this file).
//
// liblmkit.so and the apps link LibTorch's CPU library alone; LibTorch's CUDA libraries
// (libtorch_cuda and the CUDA runtime, cuBLAS, cuDNN, NCCL it loads: 0.15 s and 350 MB of
// every process on this machine, GPU or not), lmkit's fused kernels and NCCL's process group
// live in this module, which lmkit dlopen()s the first time a CUDA device is asked for
// (lmkit::cuda_available, core/cuda.h). Its entry point returns this table of functions.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>

#include "lmkit/core/cuda.h"
#include "lmkit/nn/kernels.h"

namespace c10d {
class Store;
class Backend;
}  // namespace c10d

namespace lmkit::detail {

/// Bumped when the table changes: a module from another build is refused by name.
constexpr int kCudaModuleAbi = 1;

struct CudaModule {
  int abi;
  /// The current CUDA stream of `device` (a cudaStream_t).
  void* (*current_stream)(int device);
  /// Philox key and offset from `device`'s default generator, advanced by `increment` (ATen's
  /// philox_engine_inputs: what ATen's own dropout draws, and what a checkpoint saves).
  void (*philox_inputs)(int device, uint64_t increment, uint64_t* seed, uint64_t* offset);
  /// The fused kernels of nn/kernels.h; null when the module was built without them (no nvcc).
  decltype(&nn::kernels::residual_norm_forward) residual_norm_forward;
  decltype(&nn::kernels::residual_norm_backward) residual_norm_backward;
  decltype(&nn::kernels::column_partials_size) column_partials_size;
  decltype(&nn::kernels::gelu_bias_backward) gelu_bias_backward;
  decltype(&nn::kernels::softmax_cross_entropy) softmax_cross_entropy;
  /// NCCL's process group on `device`; null when the module was built without NCCL.
  c10::intrusive_ptr<c10d::Backend> (*make_nccl)(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 std::chrono::milliseconds timeout, int device);
};

/// The loaded module's table (loaded on the first call; RuntimeError when there is none).
inline const CudaModule& cuda_module() { return *static_cast<const CudaModule*>(cuda_module_table()); }

}  // namespace lmkit::detail

extern "C" {
/// The module's one exported symbol.
const lmkit::detail::CudaModule* lmkit_cuda_module();
}
