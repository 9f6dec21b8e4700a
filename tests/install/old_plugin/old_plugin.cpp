// A plugin that says it was built against another lmkit (0.0.1): the apps must refuse it by
// name before it registers anything (tests/install/install_test.sh). Only the plugin header,
// so that it compiles in a second, without LibTorch's headers.
#define LMKIT_PLUGIN_LMKIT_VERSION "0.0.1"
#include "lmkit/core/plugin.h"

namespace {
void register_nothing() {}
}  // namespace

LMKIT_PLUGIN(register_nothing)
