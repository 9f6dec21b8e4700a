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
    std::string path;
    if (arg == "--plugin") {
      if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0) throw InputError("--plugin needs a FILE");
      path = argv[++i];
    } else if (arg.rfind("--plugin=", 0) == 0) {
      path = arg.substr(9);
    } else {
      continue;
    }
    check_input(!path.empty(), "--plugin needs a FILE (it was given an empty one)");
    paths.push_back(path);
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

// A version entry point's string; a plugin that returns none is named, not a crash.
std::string version_of(void* handle, const std::string& path, const char* name) {
  const char* v = call_registered(path, name, [&] { return symbol<const char* (*)()>(handle, path, name)(); });
  if (!v) throw InputError(path + ": " + name + "() returned no version string: rebuild the plugin with LMKIT_PLUGIN");
  return v;
}

// One plugin file, however it is spelt (./p.so, a/../p.so, a symbolic link): its real path.
std::string real_path(const std::string& path) {
  std::error_code error;
  const auto canonical = std::filesystem::canonical(path, error);
  return error ? path : canonical.string();
}

void load_plugin(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw InputError(path + ": a directory, not a plugin file (name its .so)");
  if (!std::filesystem::is_regular_file(path)) throw InputError(path + ": no such plugin file");
  const std::string real = real_path(path);
  for (const auto& done : loaded()) {
    if (real_path(done) == real) return;
  }
  // A path with a slash: dlopen() must not search the library path for a bare name.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  // Its static initialisers run here, before the versions can be read (docs/library.md).
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw InputError(path + ": cannot load the plugin (" + ::dlerror() + ")");
  const std::string built = version_of(handle, path, "lmkit_plugin_lmkit_version");
  const std::string torch = version_of(handle, path, "lmkit_plugin_torch_version");
  if (built != version() || torch != torch_version()) {
    throw InputError(path + ": built against lmkit " + built + " and LibTorch " + torch + ", but this is lmkit " +
                     version() + " on LibTorch " + torch_version() + ": rebuild the plugin against this lmkit");
  }
  const auto register_entries = symbol<void (*)()>(handle, path, "lmkit_plugin_register");
  current_source() = path;
  try {
    call_registered(path, "its registration", register_entries);
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
  } catch (const std::exception& e) {  // not from a plugin's code (call_registered names those)
    std::fprintf(stderr, "error: loading the plugins failed: %s\n", e.what());
    return static_cast<int>(ExitCode::kRuntime);
  }
}

const std::vector<std::string>& loaded_plugins() { return loaded(); }

bool plugin_loaded(const std::string& path) {
  const std::string real = real_path(path);
  for (const auto& l : loaded()) {
    if (real_path(l) == real || std::filesystem::path(l).filename() == std::filesystem::path(path).filename()) return true;
  }
  return false;
}

const std::string& registering_source() { return current_source(); }

}  // namespace lmkit
