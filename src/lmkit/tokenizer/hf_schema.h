// What the readers and the writer of HuggingFace's tokenizer files share: the
// files a HF directory may hold, transformers' configs, and small JSON helpers
// that name the file when a key is missing or of the wrong kind.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::tokenizer::hf {

inline const std::string kMetaspace = "\xE2\x96\x81";  // "▁"

/// The files a HF tokenizer directory may hold, kept verbatim when lmkit saves it again.
const std::vector<std::string>& directory_files();

/// transformers' tokenizer_config.json and special_tokens_map.json in `dir`, merged (the
/// config wins): the special tokens' names and the keys lmkit reads; lmkit_family set
/// from tokenizer_class or config.json's model_type where they name a family. With
/// `model_file`, files written for another .model in the folder are skipped.
Json read_config(const std::filesystem::path& dir, const std::string& model_file = "");

/// A key of a JSON object; InputError naming `what` when it is missing.
const Json& need(const Json& obj, const char* key, const std::string& what);
/// A true/false key, `fallback` when absent (or null); InputError when of another kind.
bool flag(const Json& obj, const char* key, bool fallback, const std::string& what);
/// An object's "type" ("null" for null, "?" when it has none).
std::string type_of(const Json& obj);
/// The steps of a (possibly Sequence) normalizer / pre-tokenizer / decoder.
std::vector<Json> steps(const Json& obj, const char* list_key);
/// A vocabulary object {piece: id} as a vector indexed by id (holes stay "").
std::vector<std::string> vocab_by_id(const Json& vocab, const std::string& what);

}  // namespace lmkit::tokenizer::hf
