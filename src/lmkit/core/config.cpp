#include "lmkit/core/config.h"

#include "lmkit/core/file.h"
#include "lmkit/core/names.h"

#include <algorithm>
#include <functional>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_set>
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

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string hint;
  size_t best = 3;  // suggest only close matches
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best) best = d, hint = c;
  }
  return hint;
}

namespace {

// Nesting depth, outside strings, without recursion (nlohmann's parser recurses).
void check_json_depth(std::string_view text, const std::function<std::string(size_t)>& at) {
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t line = 1;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw InputError(at(line) + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// A number beyond double's range (1e400): nlohmann names the literal but not
// where it is; its first occurrence gives the line.
Error out_of_range_error(std::string_view text, const nlohmann::json::out_of_range& e,
                         const std::function<std::string(size_t)>& at) {
  std::string message = e.what();
  message = message.substr(message.find(']') + 2);
  const auto quote = message.find('\''), end = message.rfind('\'');
  size_t error_line = 1;
  if (quote != std::string::npos && end > quote) {
    const auto hit = text.find(message.substr(quote + 1, end - quote - 1));
    if (hit != std::string_view::npos) error_line += std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(hit), '\n');
  }
  if (message.size() > 200) message = message.substr(0, 200) + "...";
  return InputError(at(error_line) + ": " + message + " (beyond a double's range)");
}

}  // namespace

Json parse_json(std::string_view text, const std::string& what, bool with_line) {
  const std::function<std::string(size_t)> at = [&](size_t n) { return with_line ? what + ":" + std::to_string(n) : what; };
  check_json_depth(text, at);
  // A key twice in one object: nlohmann keeps the last silently (a safetensors header
  // with a tensor twice loaded the second copy). Refused, naming the key.
  std::vector<std::unordered_set<std::string>> keys;
  std::string duplicate;
  const Json::parser_callback_t unique = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == Json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    Json value = Json::parse(text.begin(), text.end(), unique);
    if (!duplicate.empty()) throw InputError(what + ": key '" + duplicate.substr(0, 100) + "' appears twice in one object");
    return value;
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports a byte offset; users want a line.
    const size_t offset = std::min<size_t>(e.byte, text.size());
    const size_t error_line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    std::string message = e.what();
    const auto pos = message.find("syntax error");
    message = pos == std::string::npos ? message : message.substr(pos);
    if (message.size() > 200) message = message.substr(0, 200) + "...";
    throw InputError(at(error_line) + ": malformed JSON (" + message + ")");
  } catch (const nlohmann::json::out_of_range& e) {
    throw out_of_range_error(text, e, at);
  }
}

Json load_json_file(const std::string& path) { return parse_json(read_file(path), path); }

std::string brief_json(const Json& value, size_t max) {
  // Containers are summarised before dumping, so a huge value is never serialised whole.
  if (value.is_object() && value.size() > 8) return "an object of " + std::to_string(value.size()) + " keys";
  if (value.is_array() && value.size() > 8) return "an array of " + std::to_string(value.size()) + " items";
  if (value.is_string() && value.get_ref<const std::string&>().size() > max) {
    return "\"" + value.get_ref<const std::string&>().substr(0, max) + "...\"";
  }
  std::string text = value.dump();
  return text.size() > max ? text.substr(0, max) + "..." : text;
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
    fail(key, "must be one of {" + join_names({allowed.begin(), allowed.end()}) + "}, got \"" + value + "\"");
  }
  out = value;
  return true;
}

void ConfigReader::ignore(std::initializer_list<const char*> keys) {
  for (const char* k : keys) consumed_.insert(k), known_.insert(k);
}

void ConfigReader::ignore(const std::vector<std::string>& keys) {
  for (const auto& k : keys) consumed_.insert(k), known_.insert(k);
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
    const std::string hint = closest_name(it.key(), {known_.begin(), known_.end()});
    throw InputError(file_ + ": unknown key '" + key_path(it.key()) + "'" +
                     (hint.empty() ? "" : " (did you mean '" + key_path(hint) + "'?)"));
  }
}

}  // namespace lmkit
