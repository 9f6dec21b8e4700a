#include "lmkit/core/plugin.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "lmkit/core/error.h"

namespace lmkit {

namespace {

std::vector<std::string>& loaded() {
  static std::vector<std::string> paths;
  return paths;
}

std::string& current_source() {
  static std::string source = "lmkit";
  return source;
}

// The paths of --plugin FILE / --plugin=FILE, then of $LMKIT_PLUGINS.
std::vector<std::string> requested_plugins(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--plugin") {
      if (i + 1 >= argc) throw InputError("--plugin needs a FILE");
      paths.emplace_back(argv[++i]);
    } else if (arg.rfind("--plugin=", 0) == 0) {
      paths.push_back(arg.substr(9));
    }
  }
  if (const char* env = std::getenv("LMKIT_PLUGINS")) {
    std::stringstream list(env);
    for (std::string path; std::getline(list, path, ':');) {
      if (!path.empty()) paths.push_back(path);
    }
  }
  return paths;
}

template <typename F>
F symbol(void* handle, const std::string& path, const char* name) {
  void* f = ::dlsym(handle, name);
  if (!f) throw InputError(path + ": not an lmkit plugin (no " + name + "; define its entry points with LMKIT_PLUGIN)");
  return reinterpret_cast<F>(f);
}

void load_plugin(const std::string& path) {
  for (const auto& done : loaded()) {
    if (done == path) return;
  }
  if (!std::filesystem::is_regular_file(path)) throw InputError(path + ": no such plugin file");
  // A path with a slash: dlopen() must not search the library path for a bare name.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw InputError(path + ": cannot load the plugin (" + ::dlerror() + ")");
  const std::string built = symbol<const char* (*)()>(handle, path, "lmkit_plugin_lmkit_version")();
  const std::string torch = symbol<const char* (*)()>(handle, path, "lmkit_plugin_torch_version")();
  if (built != version() || torch != torch_version()) {
    throw InputError(path + ": built against lmkit " + built + " and LibTorch " + torch + ", but this is lmkit " +
                     version() + " on LibTorch " + torch_version() + ": rebuild the plugin against this lmkit");
  }
  const auto register_entries = symbol<void (*)()>(handle, path, "lmkit_plugin_register");
  current_source() = path;
  try {
    register_entries();
  } catch (...) {
    current_source() = "lmkit";
    throw;
  }
  current_source() = "lmkit";
  loaded().push_back(path);
}

}  // namespace

int load_plugins(int argc, char** argv) {
  try {
    for (const auto& path : requested_plugins(argc, argv)) load_plugin(path);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: a plugin failed while registering: %s\n", e.what());
    return static_cast<int>(ExitCode::kRuntime);
  }
}

const std::vector<std::string>& loaded_plugins() { return loaded(); }

const std::string& registering_source() { return current_source(); }

}  // namespace lmkit
