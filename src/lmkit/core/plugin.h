// Plugins: shared objects built against the installed lmkit (find_package(lmkit)) that
// add families, objectives or tasks to the registries before an app parses its flags, so
// that what they add shows in --help, in the choices and in error messages
// (docs/library.md, "Plugins"). A plugin defines its entry point with LMKIT_PLUGIN:
//
//   void register_mine() { lmkit::data::register_objective(my_objective()); }
//   LMKIT_PLUGIN(register_mine)
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "lmkit/core/error.h"
#include "lmkit/version.h"

namespace lmkit {

/// Loads the plugins named by every `--plugin FILE` (or `--plugin=FILE`) in argv and
/// by $LMKIT_PLUGINS (paths separated by ':'), in that order, each once (one file however
/// its path is spelt). A plugin built against another lmkit or LibTorch version is refused
/// before its registration function runs (its static initialisers have run then). Call it
/// first in main(), before the flags are built. Returns 0, or the exit code after one
/// `error:` line (2: a missing file, not a plugin, another version, a name registered twice).
int load_plugins(int argc, char** argv);

/// The plugins loaded so far, as their paths were given (lmkit-suite passes them on).
const std::vector<std::string>& loaded_plugins();

/// Whether the plugin file `path` is loaded: the same real path, or a file of the same name
/// (a plugin rebuilt or moved with a run directory).
bool plugin_loaded(const std::string& path);

/// What registers right now: "lmkit" for the built-in entries, a plugin's path while
/// its registration function runs. Registries name it when a name is taken twice.
const std::string& registering_source();

/// Calls `fn`, code a registry entry of `source` ("lmkit" or a plugin's path) provides, so that
/// nothing it throws takes the app down unnamed: lmkit's own Error keeps its exit code, with the
/// plugin's path before its message unless it names it already; any other exception, std or not, becomes a RuntimeError
/// (exit 1) naming the plugin and `what` (e.g. "model_type 'toy': create").
template <typename Fn>
auto call_registered(const std::string& source, const std::string& what, Fn&& fn) -> decltype(fn()) {
  if (source == "lmkit") return fn();
  try {
    return fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    throw Error(e.code(), message.find(source) != std::string::npos ? message : source + ": " + message);
  } catch (const std::exception& e) {
    throw RuntimeError(source + ": " + what + " failed: " + e.what());
  } catch (...) {
    throw RuntimeError(source + ": " + what + " threw something that is not a std::exception");
  }
}

}  // namespace lmkit

// The version macros a plugin reports: its own build's (lmkit/version.h), unless set
// before this header (the tests build a plugin that claims another version).
#ifndef LMKIT_PLUGIN_LMKIT_VERSION
#define LMKIT_PLUGIN_LMKIT_VERSION LMKIT_VERSION
#endif

/// Defines a plugin's entry points: the versions it was built against and `fn`, which registers its entries.
#define LMKIT_PLUGIN(fn)                                                                        \
  extern "C" const char* lmkit_plugin_lmkit_version() { return LMKIT_PLUGIN_LMKIT_VERSION; } \
  extern "C" const char* lmkit_plugin_torch_version() { return LMKIT_TORCH_VERSION; }        \
  extern "C" void lmkit_plugin_register() { fn(); }
