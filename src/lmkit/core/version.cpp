#include "lmkit/version.h"

namespace lmkit {

// Compiled into the library: a program built against other headers still reports the library's.
std::string version() { return LMKIT_VERSION; }
std::string torch_version() { return LMKIT_TORCH_VERSION; }

}  // namespace lmkit
