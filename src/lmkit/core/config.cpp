#include "lmkit/core/config.h"

#include "lmkit/core/file.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace lmkit {
namespace {

// Levenshtein distance, for "did you mean" hints on misspelt keys.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

Json load_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports a byte offset; users want a line.
    size_t offset = std::min<size_t>(e.byte, text.size());
    size_t line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    std::string what = e.what();
    auto pos = what.find("syntax error");
    throw InputError(path + ":" + std::to_string(line) + ": malformed JSON (" +
                     (pos == std::string::npos ? what : what.substr(pos)) + ")");
  }
}

void save_json_file(const std::string& path, const Json& value) { write_file_atomic(path, value.dump(2) + "\n"); }

ConfigReader::ConfigReader(const Json& object, std::string file, std::string path)
    : object_(object), file_(std::move(file)), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw InputError(file_ + ": " + (path_.empty() ? "the top level" : "'" + path_ + "'") + " must be a JSON object");
  }
}

const Json& ConfigReader::at(const std::string& key) {
  consumed_.insert(key);
  return object_.at(key);
}

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  throw InputError(file_ + ": key '" + key_path(key) + "' " + what);
}

bool ConfigReader::get_choice(const std::string& key, std::string& out, const std::set<std::string>& allowed) {
  known_.insert(key);
  std::string value = out;
  if (!get(key, value)) return false;
  if (!allowed.count(value)) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(key, "must be one of {" + list + "}, got \"" + value + "\"");
  }
  out = value;
  return true;
}

void ConfigReader::ignore(std::initializer_list<const char*> keys) {
  for (const char* k : keys) consumed_.insert(k), known_.insert(k);
}

ConfigReader ConfigReader::child(const std::string& key) {
  known_.insert(key);
  const Json& v = at(key);
  if (!v.is_object()) fail(key, "must be a JSON object");
  return ConfigReader(v, file_, key_path(key));
}

void ConfigReader::finish() const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (consumed_.count(it.key())) continue;
    std::string hint;
    size_t best = 3;  // suggest only close matches
    for (const auto& known : known_) {
      size_t d = edit_distance(it.key(), known);
      if (d < best) best = d, hint = known;
    }
    throw InputError(file_ + ": unknown key '" + key_path(it.key()) + "'" +
                     (hint.empty() ? "" : " (did you mean '" + key_path(hint) + "'?)"));
  }
}

}  // namespace lmkit
