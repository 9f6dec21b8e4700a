#include "lmkit/io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"

namespace fs = std::filesystem;

namespace lmkit::io {

namespace {

// lmkit replaces only what it wrote itself: an existing target must be a directory
// holding nothing but names the new contents have (a user's folder given as an
// output lost its files this way).
void check_replaceable(const fs::path& target, const fs::path& fresh) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target, ec))) return;
  if (!fs::is_directory(fs::symlink_status(target, ec))) {
    throw InputError(target.string() + ": exists and is not a directory lmkit wrote; choose another output");
  }
  std::set<std::string> ours;
  for (const auto& e : fs::directory_iterator(fresh, ec)) ours.insert(e.path().filename().string());
  std::vector<std::string> foreign;
  for (const auto& e : fs::directory_iterator(target, ec)) {
    const std::string name = e.path().filename().string();
    if (!ours.count(name)) foreign.push_back(name);
  }
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    throw InputError(target.string() + ": holds files lmkit did not write (" + first_names(foreign) +
                     "); it is not replaced: choose another output");
  }
}

}  // namespace

void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& fill) {
  const fs::path target = fs::path(dir).lexically_normal();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw RuntimeError(parent.string() + ": cannot create directory (" + ec.message() + ")");
  remove_stale_temporaries(target.string());
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
  try {
    check_replaceable(target, tmp);
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
