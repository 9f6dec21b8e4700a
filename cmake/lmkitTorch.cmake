# LibTorch for lmkit and for projects on the installed lmkit (lmkitConfig.cmake
# includes this file): find_package(Torch) that works without a CUDA toolkit, and
# the oldest LibTorch lmkit's code path takes.
#
# PyPI's torch is a CUDA build, and its CMake config insists on a CUDA toolkit
# (nvcc) even to link against it: on a machine without one (a fresh Debian, a
# laptop) configuring failed with "Your installed Caffe2 version uses CUDA but I
# cannot find the CUDA libraries". The wheel already depends on the CUDA runtime
# it was built with (site-packages/nvidia/cu13: headers and libcudart), which is
# all lmkit needs, so without a toolkit the target that torch's cuda.cmake looks
# for first is defined from it and the toolkit search is skipped.
#
# A project on the installed lmkit compiles no CUDA (lmkitConfig.cmake sets
# LMKIT_TORCH_RUNTIME_ONLY): it takes the same path even where a toolkit is installed,
# unless it enables CUDA itself, so that its configure does not detect a toolkit, list
# GPU architectures and warn about CMAKE_CUDA_ARCHITECTURES for nothing it builds.
find_program(LMKIT_NVCC nvcc HINTS "${CUDAToolkit_ROOT}/bin" "$ENV{CUDA_HOME}/bin" /usr/local/cuda/bin)
find_path(LMKIT_TORCH_CMAKE_DIR Torch/TorchConfig.cmake PATHS ${CMAKE_PREFIX_PATH} "${Torch_DIR}/.." NO_DEFAULT_PATH)
if((NOT LMKIT_NVCC OR LMKIT_TORCH_RUNTIME_ONLY) AND NOT CMAKE_CUDA_COMPILER AND NOT TARGET torch::cudart)
  if(LMKIT_TORCH_CMAKE_DIR AND EXISTS "${LMKIT_TORCH_CMAKE_DIR}/../../lib/libtorch_cuda.so")
    get_filename_component(LMKIT_TORCH_SITE "${LMKIT_TORCH_CMAKE_DIR}/../../.." ABSOLUTE)
    file(GLOB LMKIT_WHEEL_CUDART "${LMKIT_TORCH_SITE}/nvidia/cu*/lib/libcudart.so.*"
                                 "${LMKIT_TORCH_SITE}/nvidia/cuda_runtime/lib/libcudart.so.*")
    if(NOT LMKIT_WHEEL_CUDART)
      message(FATAL_ERROR "LibTorch at ${LMKIT_TORCH_CMAKE_DIR} is a CUDA build, and there is neither a CUDA toolkit "
        "(nvcc) nor the wheel's CUDA runtime (${LMKIT_TORCH_SITE}/nvidia/cu*/lib): install the CUDA toolkit, "
        "or run scripts/setup.sh, which installs torch with its dependencies into .venv")
    endif()
    list(GET LMKIT_WHEEL_CUDART 0 LMKIT_WHEEL_CUDART)
    get_filename_component(LMKIT_WHEEL_CUDA "${LMKIT_WHEEL_CUDART}/../.." ABSOLUTE)
    add_library(torch::cudart INTERFACE IMPORTED)
    set_target_properties(torch::cudart PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${LMKIT_WHEEL_CUDA}/include"
      INTERFACE_LINK_LIBRARIES "${LMKIT_WHEEL_CUDART}")
    message(STATUS "lmkit: the CUDA runtime of the torch wheel (${LMKIT_WHEEL_CUDA}); no CUDA toolkit used")
  endif()
endif()

# PyPI's LibTorch links kineto (the profiler) into libtorch_cpu.so and ships no libkineto,
# so TorchConfig's "library kineto not found" warning reports nothing missing: it is
# pointed at the library that holds it (which TorchConfig links anyway).
set(LMKIT_TORCH_LIB "${LMKIT_TORCH_CMAKE_DIR}/../../lib")
if(LMKIT_TORCH_CMAKE_DIR AND NOT DEFINED CACHE{kineto_LIBRARY} AND EXISTS "${LMKIT_TORCH_LIB}/libtorch_cpu.so"
   AND NOT EXISTS "${LMKIT_TORCH_LIB}/libkineto.a" AND NOT EXISTS "${LMKIT_TORCH_LIB}/libkineto.so")
  get_filename_component(LMKIT_TORCH_LIB "${LMKIT_TORCH_LIB}" ABSOLUTE)
  set(kineto_LIBRARY "${LMKIT_TORCH_LIB}/libtorch_cpu.so" CACHE FILEPATH "kineto: inside libtorch_cpu.so (PyPI's LibTorch)")
endif()
# With a CUDA toolkit, torch's cuda.cmake enables CUDA, which sets CMAKE_CUDA_ARCHITECTURES to
# nvcc's default, and then warns that it ignores that value (every configure on a machine with
# nvcc printed the warning). CMP0104 OLD leaves it unset there; lmkit's CUDA targets name their
# architectures themselves (CUDA_ARCHITECTURES). This file's policy settings end with it.
if(POLICY CMP0104)
  cmake_policy(SET CMP0104 OLD)
endif()
find_package(Torch REQUIRED ${LMKIT_TORCH_QUIET})
# One code path: LibTorch 2.4 and later (the non-deprecated autocast API, SDPA with a
# scale argument, the 2.3+ allocator interface).
set(LMKIT_MIN_TORCH 2.4)
if(NOT DEFINED Torch_VERSION OR Torch_VERSION VERSION_LESS LMKIT_MIN_TORCH)
  message(FATAL_ERROR "lmkit needs LibTorch >= ${LMKIT_MIN_TORCH}; found '${Torch_VERSION}' at ${Torch_DIR}. "
    "Run scripts/setup.sh (installs torch into .venv) or pass -DCMAKE_PREFIX_PATH=/path/to/libtorch.")
endif()
