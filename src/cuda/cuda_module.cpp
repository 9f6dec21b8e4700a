// liblmkit_cuda.so: LibTorch's CUDA side behind the table of cuda_api.h. Linked against
// libtorch_cuda, so loading it registers LibTorch's CUDA backend (its kernels, generators,
// device guard and hooks) in the process.
#include "cuda_api.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>

#include <mutex>

#ifdef LMKIT_WITH_NCCL
#define USE_C10D_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace {

void* current_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

void philox_inputs(int device, uint64_t increment, uint64_t* seed, uint64_t* offset) {
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(static_cast<c10::DeviceIndex>(device)));
  std::lock_guard<std::mutex> lock(gen->mutex_);
  const auto [s, o] = gen->philox_engine_inputs(increment);
  *seed = s;
  *offset = o;
}

#ifdef LMKIT_WITH_NCCL
c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout, int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}
#endif

}  // namespace

extern "C" const lmkit::detail::CudaModule* lmkit_cuda_module() {
  namespace k = lmkit::nn::kernels;
  static const lmkit::detail::CudaModule table{
      lmkit::detail::kCudaModuleAbi,
      &current_stream,
      &philox_inputs,
#ifdef LMKIT_WITH_CUDA_KERNELS
      &k::residual_norm_forward,
      &k::residual_norm_backward,
      &k::column_partials_size,
      &k::gelu_bias_backward,
      &k::softmax_cross_entropy,
#else
      nullptr, nullptr, nullptr, nullptr, nullptr,
#endif
#ifdef LMKIT_WITH_NCCL
      &make_nccl,
#else
      nullptr,
#endif
  };
  return &table;
}
