#include "lmkit/tokenizer/hf_schema.h"

#include <algorithm>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/tokenizer/families.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer::hf {
namespace {

// A special token's name in transformers' files: a string, or {"content": ...}.
std::optional<std::string> token_name(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& directory_files() {
  static const std::vector<std::string> kFiles = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                                  "added_tokens.json", "vocab.txt", "vocab.json", "merges.txt",
                                                  "spiece.model", "tokenizer.model"};
  return kFiles;
}

// A key of a tokenizer.json object, with the file named when it is missing or of the wrong kind.
const Json& need(const Json& obj, const char* key, const std::string& what) {
  if (!obj.is_object() || !obj.contains(key)) throw InputError(what + ": missing '" + key + "'");
  return obj[key];
}

// A true/false key of a tokenizer.json object, `fallback` when absent (or null).
bool flag(const Json& obj, const char* key, bool fallback, const std::string& what) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_boolean()) throw InputError(what + ": '" + key + "' must be true or false, got " + brief_json(obj[key]));
  return obj[key].get<bool>();
}

std::string type_of(const Json& obj) {
  if (obj.is_null()) return "null";
  if (!obj.is_object() || !obj.contains("type") || !obj["type"].is_string()) return "?";
  return obj["type"].get<std::string>();
}

// The steps of a (possibly Sequence) normalizer / pre-tokenizer / decoder.
std::vector<Json> steps(const Json& obj, const char* list_key) {
  if (obj.is_null()) return {};
  if (type_of(obj) == "Sequence" && obj.contains(list_key)) return obj[list_key].get<std::vector<Json>>();
  return {obj};
}

// The ids of a vocabulary object {piece: id}, as a vector indexed by id (holes stay "").
std::vector<std::string> vocab_by_id(const Json& vocab, const std::string& what) {
  if (!vocab.is_object()) throw InputError(what + ": the vocabulary is not an object of piece: id");
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 50000000) {
      throw InputError(what + ": vocabulary entry '" + piece + "' has no valid id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  std::vector<std::string> out(static_cast<size_t>(max_id + 1));
  for (const auto& [piece, id] : vocab.items()) {
    std::string& slot = out[static_cast<size_t>(id.get<int64_t>())];
    if (!slot.empty()) {
      throw InputError(what + ": vocabulary entries '" + slot + "' and '" + piece + "' have the same id " +
                       std::to_string(id.get<int64_t>()));
    }
    slot = piece;
  }
  return out;
}

// transformers' tokenizer_config.json and special_tokens_map.json, merged (the config wins).
Json read_config(const fs::path& dir, const std::string& model_file) {
  Json names = Json::object();
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const fs::path p = dir / file;
    if (!fs::exists(p)) continue;
    const Json j = load_json_file(p.string());
    if (!j.is_object()) throw InputError(p.string() + ": not a JSON object");
    // lmkit before 0.2 wrote its own schema under this name; it names the family only.
    if (j.contains("sentencepiece_pieces") && j.contains("family")) {
      names.emplace("lmkit_family", j["family"]);
      continue;
    }
    // A folder's HF files describe one tokenizer; another .model beside them is not that one.
    if (!model_file.empty() && j.contains("lmkit_model_file") && j["lmkit_model_file"] != model_file) continue;
    for (const auto& [key, value] : j.items()) {
      if (names.contains(key)) continue;
      if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) {
        const auto name = token_name(value);
        names[key] = name ? Json(*name) : Json(nullptr);
      } else if (key == "tokenizer_class" || key == "lmkit_family" || key == "extra_ids" || key == "do_lower_case" ||
                 key == "strip_accents" || key == "tokenize_chinese_chars" || key == "add_prefix_space" ||
                 key == "clean_up_tokenization_spaces" || key == "lmkit_model_file") {
        names[key] = value;
      }
    }
  }
  if (!names.contains("lmkit_family") && names.contains("tokenizer_class") && names["tokenizer_class"].is_string()) {
    const std::string f = family_of_class(names["tokenizer_class"].get<std::string>());
    if (!f.empty()) names["lmkit_family"] = f;
  }
  if (!names.contains("lmkit_family") && fs::exists(dir / "config.json")) {
    try {
      const Json c = load_json_file((dir / "config.json").string());
      const std::string type = c.is_object() ? c.value("model_type", "") : "";
      const std::string f = family_of_model_type(type);
      if (!f.empty()) names["lmkit_family"] = f;
    } catch (const Error&) {
    }
  }
  return names;
}

}  // namespace lmkit::tokenizer::hf
