#include "lmkit/core/cuda.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <torch/cuda.h>

#include <atomic>
#include <mutex>
#include <string>
#include <typeinfo>

#include "../../cuda/cuda_api.h"
#include "lmkit/core/error.h"
#include "lmkit/core/module.h"

namespace lmkit {

bool cuda_module_built() {
#ifdef LMKIT_WITH_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

namespace {
std::atomic<const detail::CudaModule*> loaded_table{nullptr};  // set once the module is loaded
}  // namespace

bool cuda_module_loaded() { return loaded_table.load() != nullptr; }

namespace detail {

const void* cuda_module_table() {
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    if (!cuda_module_built()) {
      error = "this lmkit was built without CUDA (against a CPU LibTorch, or as a sanitizer build)";
      return;
    }
    std::string tried;
    // GLOBAL: a plugin with CUDA code of its own resolves LibTorch's CUDA symbols too.
    void* lib = open_module("liblmkit_cuda.so", "LMKIT_CUDA_MODULE", RTLD_NOW | RTLD_GLOBAL, tried);
    if (!lib) {
      error = "cannot load lmkit's CUDA module liblmkit_cuda.so (tried " + tried + ")";
      return;
    }
    auto* entry = reinterpret_cast<decltype(&lmkit_cuda_module)>(::dlsym(lib, "lmkit_cuda_module"));
    if (!entry || entry()->abi != kCudaModuleAbi) {
      error = "lmkit's CUDA module liblmkit_cuda.so is from another build of lmkit: rebuild or reinstall lmkit";
      return;
    }
    // Loading libtorch_cuda registered its hooks; LibTorch took the ones it found at its first
    // CUDA question, so a question asked before this load turned CUDA off for the process.
    const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
    if (typeid(hooks) == typeid(at::CUDAHooksInterface)) {
      error = "LibTorch was asked about CUDA before lmkit loaded its CUDA module, which turned CUDA off for this "
              "process: call lmkit::cuda_available() (or parse the --device) before anything else touches CUDA";
      return;
    }
    loaded_table = entry();
  });
  const CudaModule* table = loaded_table.load();
  if (!table) throw RuntimeError(error);
  return table;
}

}  // namespace detail

bool cuda_available() {
  if (!cuda_module_built()) return false;
  (void)detail::cuda_module_table();
  return torch::cuda::is_available();
}

}  // namespace lmkit
