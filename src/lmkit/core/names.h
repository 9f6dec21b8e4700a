// Lists of names for messages, and enum <-> name tables: one table per enum gives both directions and the error
// for an unknown name, listing the names (each value's first; later ones are aliases).
//
//   static const NameTable<Schedule> kSchedules{"schedule", {{"constant", Schedule::kConstant}, ...}};
//   kSchedules.parse("cosine");           // Schedule::kCosine, or InputError "unknown schedule ..."
//   kSchedules.name(Schedule::kCosine);   // "cosine"
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "lmkit/core/error.h"

namespace lmkit {

/// Whether `s` ends with `suffix` (a file name's extension: "c4.json.gz", ".gz").
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// "a, b or c" (with last_sep " or "), "a, b, c" (with ", "): names listed in messages.
inline std::string join_names(const std::vector<std::string>& names, const std::string& last_sep = ", ") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? last_sep : ", ") + names[i];
  return out;
}

/// The first `n` names, then "and K more": "a, b, c and 4 more" (files, tensors in messages).
inline std::string first_names(const std::vector<std::string>& names, size_t n = 3) {
  std::vector<std::string> head(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(n, names.size())));
  return join_names(head) + (names.size() > n ? " and " + std::to_string(names.size() - n) + " more" : "");
}

template <typename E>
class NameTable {
 public:
  NameTable(std::string what, std::vector<std::pair<std::string, E>> entries)
      : what_(std::move(what)), entries_(std::move(entries)) {}

  E parse(const std::string& name) const {
    for (const auto& [n, v] : entries_) {
      if (n == name) return v;
    }
    std::vector<std::string> names;
    for (const auto& [n, v] : entries_) {
      if (&name_ref(v) == &n) names.push_back(n);
    }
    throw InputError("unknown " + what_ + " '" + name + "' (expected " + join_names(names, " or ") + ")");
  }

  const std::string& name(E value) const { return name_ref(value); }

 private:
  const std::string& name_ref(E value) const {
    for (const auto& [n, v] : entries_) {
      if (v == value) return n;
    }
    static const std::string none;
    return none;
  }

  std::string what_;
  std::vector<std::pair<std::string, E>> entries_;
};

}  // namespace lmkit
