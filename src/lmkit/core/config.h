// Strict JSON configs on nlohmann_json. Every key a reader does not consume is
// an error naming the key path and the file (with a "did you mean" hint), as is
// a wrong type or an out-of-range value.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "lmkit/core/error.h"

namespace lmkit {

using Json = nlohmann::json;

/// Deepest nesting parse_json accepts. nlohmann's dump() and destructor recurse per
/// level: 100,000 levels (200 KB of brackets) overflowed the stack.
constexpr int kMaxJsonDepth = 512;

/// Parses JSON text that `what` names in its errors (as "WHAT:LINE: ..." with
/// `with_line`; a JSONL row passes "FILE:LINE" and false): nesting beyond
/// kMaxJsonDepth is refused before parsing, a syntax error names the line.
Json parse_json(std::string_view text, const std::string& what, bool with_line = true);
/// Parses a JSON file; a missing file or a syntax error names the file and line.
Json load_json_file(const std::string& path);
/// A JSON value for an error message: its text, cut to about `max` characters.
std::string brief_json(const Json& value, size_t max = 80);
/// The candidate closest to `word` by edit distance when it is at most 2 (a typo),
/// else "": the "did you mean" of misspelt config keys and --config options.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);
/// Writes JSON (indented) atomically: a temporary sibling, fsync, then rename.
void save_json_file(const std::string& path, const Json& value);

/// Reads one JSON object strictly. `path` is the key path of this object inside
/// the file ("" at the top level, "model.attention" below it), used in messages.
///
///   ConfigReader r(json, "run.json");
///   r.get("hidden_size", opts.hidden_size(), 1);   // optional, must be >= 1
///   r.require("model_type", type);
///   r.finish();                                    // rejects unknown keys
class ConfigReader {
 public:
  ConfigReader(const Json& object, std::string file, std::string path = "");

  /// Reads `key` into `out` if present; leaves `out` unchanged otherwise.
  template <typename T>
  bool get(const std::string& key, T& out);
  /// As get(), and checks lo <= value <= hi for numbers.
  template <typename T>
  bool get(const std::string& key, T& out, T lo, T hi = std::numeric_limits<T>::max());
  /// As get() with bounds, for keys HF writes as null to mean "none" (no such token,
  /// the default rate): a null sets `out` to `if_null`.
  template <typename T>
  bool get_nullable(const std::string& key, T& out, T if_null, T lo, T hi = std::numeric_limits<T>::max());
  /// As get(), but a missing key is an error.
  template <typename T>
  void require(const std::string& key, T& out);
  /// Reads a string that must be one of `allowed`.
  bool get_choice(const std::string& key, std::string& out, const std::set<std::string>& allowed);
  /// Marks keys as known without reading them (e.g. HF keys lmkit has no use for).
  void ignore(std::initializer_list<const char*> keys);
  void ignore(const std::vector<std::string>& keys);
  /// A reader for the nested object under `key` (which must be an object).
  ConfigReader child(const std::string& key);

  /// Throws InputError naming the first key that nothing consumed.
  void finish() const;

  const std::string& file() const { return file_; }
  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  const Json& at(const std::string& key);

  const Json& object_;
  std::string file_;
  std::string path_;
  std::set<std::string> consumed_;  // keys present and read
  std::set<std::string> known_;     // every key asked for, for "did you mean"
};

// ---- template definitions ---------------------------------------------------

template <typename T>
bool ConfigReader::get(const std::string& key, T& out) {
  known_.insert(key);
  if (!object_.contains(key)) return false;
  const Json& v = at(key);
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail(key, "must be true or false, got " + brief_json(v));
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) fail(key, "must be an integer, got " + brief_json(v));
    if constexpr (std::is_unsigned_v<T>) {
      if (v.is_number_unsigned() == false && v.get<int64_t>() < 0) fail(key, "must be >= 0, got " + brief_json(v));
    }
    out = v.get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) fail(key, "must be a number, got " + brief_json(v));
    out = v.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail(key, "must be a string, got " + brief_json(v));
    out = v.get<std::string>();
  } else {
    try {
      out = v.get<T>();
    } catch (const nlohmann::json::exception& e) {
      fail(key, std::string("has the wrong type: ") + e.what());
    }
  }
  return true;
}

template <typename T>
bool ConfigReader::get(const std::string& key, T& out, T lo, T hi) {
  static_assert(std::is_arithmetic_v<T>, "range checks are for numbers");
  if (!get(key, out)) return false;
  if (out < lo || out > hi) {
    std::string range = hi == std::numeric_limits<T>::max() ? ">= " + std::to_string(lo)
                                                            : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    fail(key, "must be " + range + ", got " + brief_json(object_.at(key)));
  }
  return true;
}

template <typename T>
bool ConfigReader::get_nullable(const std::string& key, T& out, T if_null, T lo, T hi) {
  if (object_.contains(key) && object_.at(key).is_null()) {
    known_.insert(key), consumed_.insert(key);
    out = if_null;
    return false;
  }
  return get(key, out, lo, hi);
}

template <typename T>
void ConfigReader::require(const std::string& key, T& out) {
  if (!get(key, out)) fail(key, "is required but missing");
}

}  // namespace lmkit
