// The c10d backends lmkit builds, one translation unit each: gloo.cpp needs the
// gloo headers (Debian's libgloo-dev), nccl.cpp needs nccl.h and a CUDA LibTorch.
// Internal to dist/.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace lmkit::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout);

/// Throws RuntimeError when this build has no NCCL (see nccl_available()).
c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout, c10::Device device);

}  // namespace lmkit::dist::detail
