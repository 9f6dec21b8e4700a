#include "lmkit/io/checkpoint.h"

#include <unistd.h>

#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"

namespace fs = std::filesystem;

namespace lmkit::io {

void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& fill) {
  const fs::path target = fs::path(dir).lexically_normal();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw RuntimeError(parent.string() + ": cannot create directory (" + ec.message() + ")");
  const fs::path tmp = parent / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) throw RuntimeError(tmp.string() + ": cannot create directory (" + ec.message() + ")");
  try {
    fill(tmp.string());
    fsync_directory(tmp.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // A directory cannot be renamed over a non-empty one: move the old one aside first.
  const fs::path old = parent / ("." + target.filename().string() + ".old." + std::to_string(::getpid()));
  const bool replacing = fs::exists(target);
  if (replacing) fs::rename(target, old, ec);
  if (!ec) fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove_all(tmp);
    throw RuntimeError(target.string() + ": cannot be written (" + ec.message() + ")");
  }
  fsync_directory(parent.string());
  if (replacing) fs::remove_all(old, ec);
}

}  // namespace lmkit::io
