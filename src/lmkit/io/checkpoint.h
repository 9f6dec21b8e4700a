// Checkpoint directories written atomically: everything goes into a temporary
// sibling directory, each file fsynced, then one rename puts it in place, so a
// crash never leaves a half-written checkpoint under the final name.
#pragma once

#include <functional>
#include <string>

namespace lmkit::io {

/// Creates `dir` atomically: `fill(tmp)` writes the contents into a fresh
/// temporary sibling, which is then renamed onto `dir` (replacing an old one).
void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& fill);

}  // namespace lmkit::io
