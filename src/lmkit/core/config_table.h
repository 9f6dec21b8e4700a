// A configuration declared once: a table of its fields (the key config.json spells,
// the member it fills, what a value must be) from which strict reading, writing and
// the listing `lmkit-info --fields` prints all follow. A family's config is its table
// plus the checks that relate fields to one another (divisibility, token ids).
//
//   static const ConfigTable<GptConfig> table({
//       fields::number("n_embd", &GptConfig::n_embd, int64_t{1}),
//       fields::token_id("pad_token_id", &GptConfig::pad_token_id),
//       fields::choice("activation_function", &GptConfig::activation_function, {"gelu_new", "relu"})});
//   table.read(reader, config);   // each key: type and range checked, unknown keys refused by finish()
//   table.write(json, config);    // the same keys back, null where HF writes "none"
#pragma once

#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"

namespace lmkit {

template <class C>
struct ConfigField {
  std::string key;    ///< as config.json spells it
  std::string check;  ///< what a value must be, as listings show it: "integer >= 1", "gelu | relu"
  std::function<void(ConfigReader&, C&)> read;
  std::function<Json(const C&)> value;          ///< the value written and listed (null: HF's "none")
  std::function<bool(const C&)> written;        ///< unset: always written
  std::function<void(Json&, const C&)> write_as;  ///< unset: j[key] = value(c)
  /// Whether a config reads the key at all (listed by describe() only then); unset: always.
  std::function<bool(const C&)> reads;

  /// The same field, listed only where `reads` holds (another head's or attention's keys are
  /// not this model's to show).
  ConfigField listed_when(std::function<bool(const C&)> reads_it) const {
    ConfigField f = *this;
    f.reads = std::move(reads_it);
    return f;
  }

  /// The same field, written only where `when` holds (a head's own keys).
  ConfigField when(std::function<bool(const C&)> when) const {
    ConfigField f = *this;
    f.written = std::move(when);
    return f;
  }

  /// The same field, written where `owns` holds and read only there: elsewhere the key is
  /// refused by name ("FILE: key 'block_size' is OWNER's, not `other(c)`'s"), never read
  /// and dropped (a BERT config with Longformer's window, BigBird's blocks).
  ConfigField owned_by(std::function<bool(const C&)> owns, std::string owner,
                       std::function<std::string(const C&)> other) const {
    ConfigField f = when(owns).listed_when(owns);
    f.read = [read = read, owns, owner, other, key = key](ConfigReader& r, C& c) {
      Json v;
      if (!owns(c) && r.get(key, v)) {
        throw InputError(r.file() + ": key '" + key + "' is " + owner + "'s, and this config is " + other(c) +
                         "'s (remove the key)");
      }
      read(r, c);
    };
    return f;
  }
};

namespace fields {

template <class T>
std::string range_text(T lo, T hi) {
  const std::string type = std::is_integral_v<T> ? "integer" : "number";
  if (hi == std::numeric_limits<T>::max()) return type + " >= " + Json(lo).dump();
  return type + " in [" + Json(lo).dump() + ", " + Json(hi).dump() + "]";
}

/// An integer or a number in [lo, hi].
template <class C, class T>
ConfigField<C> number(const char* key, T C::*member, T lo, T hi = std::numeric_limits<T>::max()) {
  return {key, range_text(lo, hi), [=](ConfigReader& r, C& c) { r.get(key, c.*member, lo, hi); },
          [=](const C& c) { return Json(c.*member); }, {}, {}, {}};
}

/// As number(), where HF's null means `none`: read as `none`, and written as null when the
/// member holds `none` and `none` is no value of the range (a sentinel: -1 for "no token").
template <class C, class T>
ConfigField<C> nullable(const char* key, T C::*member, T none, T lo, T hi = std::numeric_limits<T>::max()) {
  const bool sentinel = none < lo || none > hi;
  return {key, range_text(lo, hi) + " or null",
          [=](ConfigReader& r, C& c) { r.get_nullable(key, c.*member, none, lo, hi); },
          [=](const C& c) { return sentinel && c.*member == none ? Json(nullptr) : Json(c.*member); }, {}, {}, {}};
}

/// A special token's id: an integer >= 0, or null (held as -1) for none.
template <class C>
ConfigField<C> token_id(const char* key, int64_t C::*member) {
  return nullable(key, member, int64_t{-1}, int64_t{0});
}

template <class C>
ConfigField<C> flag(const char* key, bool C::*member) {
  return {key, "true | false", [=](ConfigReader& r, C& c) { r.get(key, c.*member); },
          [=](const C& c) { return Json(c.*member); }, {}, {}, {}};
}

/// A string that must be one of `allowed`.
template <class C>
ConfigField<C> choice(const char* key, std::string C::*member, std::set<std::string> allowed) {
  std::string names;
  for (const auto& a : allowed) names += (names.empty() ? "" : " | ") + a;
  return {key, names,
          [=](ConfigReader& r, C& c) { r.get_choice(key, c.*member, allowed); },
          [=](const C& c) { return Json(c.*member); }, {}, {}, {}};
}

/// A key whose one supported value is `value` (a variant lmkit does not implement is
/// refused, not ignored): "FILE: key 'KEY' = V is not supported". Written when `write`.
template <class C>
ConfigField<C> fixed(const char* key, Json value, bool write = true) {
  ConfigField<C> f{key, "only " + value.dump(),
                   [=](ConfigReader& r, C&) {
                     Json read = value;
                     r.get(key, read);
                     if (read != value) throw InputError(r.file() + ": key '" + key + "' = " + brief_json(read) + " is not supported");
                   },
                   [=](const C&) { return value; }, {}, {}, {}};
  if (!write) f.written = [](const C&) { return false; };
  return f;
}

/// A key written as `value` that reading leaves to another reader (a generic HF key such as
/// is_encoder_decoder, which a model type implies).
template <class C>
ConfigField<C> written(const char* key, Json value) {
  return {key, "written " + value.dump(), [](ConfigReader&, C&) {}, [=](const C&) { return value; }, {}, {}, {}};
}

}  // namespace fields

template <class C>
class ConfigTable {
 public:
  /// `ignored`: keys HF writes that lmkit accepts and has no use for.
  explicit ConfigTable(std::vector<ConfigField<C>> fields, std::vector<std::string> ignored = {})
      : fields_(std::move(fields)), ignored_(std::move(ignored)) {}

  /// Reads every field `r`'s object holds into `c` (the others keep c's values).
  void read(ConfigReader& r, C& c) const {
    r.ignore(ignored_);
    for (const auto& f : fields_) f.read(r, c);
  }
  /// Writes the fields `c` holds into `j`, in the table's order.
  void write(Json& j, const C& c) const {
    for (const auto& f : fields_) {
      if (f.written && !f.written(c)) continue;
      if (f.write_as) f.write_as(j, c);
      else j[f.key] = f.value(c);
    }
  }
  /// One row a field `c` reads: {key, value (c's), default (defaults'), check}.
  Json describe(const C& c, const C& defaults) const {
    Json rows = Json::array();
    for (const auto& f : fields_) {
      if (f.reads && !f.reads(c)) continue;
      rows.push_back({{"key", f.key}, {"value", f.value(c)}, {"default", f.value(defaults)}, {"check", f.check}});
    }
    return rows;
  }

 private:
  std::vector<ConfigField<C>> fields_;
  std::vector<std::string> ignored_;
};

}  // namespace lmkit
