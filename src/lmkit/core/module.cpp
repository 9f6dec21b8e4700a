#include "lmkit/core/module.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace lmkit::detail {

void* open_module(const std::string& file, const char* env, int flags, std::string& tried) {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv(env)) candidates.push_back(path);
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&open_module), &self) && self.dli_fname) {
    candidates.push_back((fs::path(self.dli_fname).parent_path() / file).string());
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / file).string());
    candidates.push_back((exe.parent_path() / ".." / "lib" / file).string());
    candidates.push_back((exe.parent_path() / ".." / "lib" / "lmkit" / file).string());
  }
  tried.clear();
  for (const auto& path : candidates) {
    tried += (tried.empty() ? "" : ", ") + path;
    if (!fs::exists(path)) continue;
    if (void* handle = ::dlopen(path.c_str(), flags)) return handle;
    tried += std::string(" (") + ::dlerror() + ")";
  }
  return nullptr;
}

}  // namespace lmkit::detail
