// CUDA through lmkit's CUDA module (liblmkit_cuda.so, src/cuda/cuda_api.h): liblmkit.so and the
// apps link LibTorch's CPU library alone, so a run on the CPU never loads LibTorch's CUDA
// libraries (0.15 s and 350 MB of every process on this machine, GPU or not); the module, and
// with it libtorch_cuda, is loaded the first time a CUDA device is asked for.
//
// LibTorch decides once per process, at the first question about CUDA, whether it has CUDA
// (at::detail::getCUDAHooks): a program that uses CUDA through lmkit asks lmkit first —
// parse_device("cuda"), init_runtime with a CUDA device, or cuda_available().
#pragma once

namespace lmkit {

/// Whether this lmkit was built with its CUDA module (against a CUDA LibTorch).
bool cuda_module_built();

/// Whether the CUDA module is loaded (without loading it).
bool cuda_module_loaded();

/// Loads the CUDA module (once) and says whether a CUDA device is usable here. False on a
/// build without the module. Throws RuntimeError when the module cannot be loaded, or when
/// LibTorch was asked about CUDA before it was (CUDA is then off for the whole process).
bool cuda_available();

namespace detail {
/// The loaded module's table (a const CudaModule*, src/cuda/cuda_api.h), loading it on the
/// first call; throws RuntimeError naming what is missing.
const void* cuda_module_table();
}  // namespace detail

}  // namespace lmkit
