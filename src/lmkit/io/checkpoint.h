// Checkpoint directories written atomically: everything goes into a temporary
// sibling directory, each file fsynced, then one rename puts it in place, so a
// crash never leaves a half-written checkpoint under the final name.
#pragma once

#include <functional>
#include <string>

namespace lmkit::io {

/// Creates `dir` atomically: `fill(tmp)` writes the contents into a fresh
/// temporary sibling, which is then renamed onto `dir`. An existing `dir` is
/// replaced only when it holds nothing but names the new contents have (an
/// earlier version of the same output); anything else is an InputError and stays
/// as it was. Temporaries that killed writers left beside `dir` are removed.
void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& fill);

}  // namespace lmkit::io
