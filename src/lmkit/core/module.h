// lmkit's run-time modules: shared libraries that nothing links and lmkit dlopen()s the first
// time it needs them — the SentencePiece module (liblmkit_spm.so: its protobuf clashes with
// LibTorch's) and the CUDA module (liblmkit_cuda.so: LibTorch's CUDA libraries, which a run on
// the CPU never loads). docs/architecture.md.
#pragma once

#include <string>

namespace lmkit::detail {

/// dlopen()s the module `file` (e.g. "liblmkit_spm.so") with `flags`: the path in the environment
/// variable `env` when it is set, else beside liblmkit.so (where the build and `cmake --install`
/// put it, found from any program that links lmkit), beside the executable, in its ../lib or
/// ../lib/lmkit. Returns the handle, or nullptr with `tried` naming each path tried and why it failed.
void* open_module(const std::string& file, const char* env, int flags, std::string& tried);

}  // namespace lmkit::detail
