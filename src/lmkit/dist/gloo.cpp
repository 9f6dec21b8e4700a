// The Gloo process group, from the c10d class the PyPI wheel compiles into
// libtorch_cpu. Its header includes a handful of gloo headers the wheel does not
// ship; Debian's libgloo-dev provides them. Only declarations are used: the
// options and the group are built by LibTorch's own out-of-line code (its gloo,
// not Debian's libgloo, which nothing links), and every gloo type reaches this
// file behind a shared_ptr, so the two gloo versions never share an object
// layout (docs/distributed.md, "Why Gloo this way").
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "lmkit/dist/backends.h"

namespace lmkit::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout) {
  // create_default: a TCP device bound to this host's address (loopback when the
  // hostname does not resolve); GLOO_SOCKET_IFNAME picks an interface, as in PyTorch.
  auto options = c10d::ProcessGroupGloo::Options::create_default(timeout);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace lmkit::dist::detail
