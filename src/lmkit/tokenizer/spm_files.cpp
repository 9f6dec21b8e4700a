// SentencePiece .model files: lmkit's (PATH.lmkit.json beside them names the
// family) and those of HF directories (T5's spiece.model, with transformers' configs).
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/hf.h"
#include "lmkit/tokenizer/hf_schema.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {

TokenizerParts read_sentencepiece_file(const fs::path& file) {
  const std::string what = file.string();
  TokenizerParts t;
  t.model_bytes = read_file(what);
  t.checksum = fnv1a64(t.model_bytes);
  t.source = what;
  t.backend = load_sentencepiece(t.model_bytes, what);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  const fs::path meta = dir / (file.stem().string() + ".lmkit.json");
  if (fs::exists(meta)) {
    const Json m = load_json_file(meta.string());
    if (m.is_object() && m.contains("family") && m["family"].is_string()) t.special_names["lmkit_family"] = m["family"];
    return t;
  }
  t.special_names = hf::read_config(dir, file.filename().string());
  // transformers' configs name their own special tokens; lmkit's families know theirs.
  // transformers converts a SentencePiece model it finds in a HF directory to a fast
  // tokenizer whose Metaspace decoder lmkit follows (T5's spiece.model).
  t.metaspace_decoder = t.special_names.contains("tokenizer_class");
  if (!t.special_names.contains("tokenizer_class")) {
    const Json family_only = t.special_names.contains("lmkit_family") ? t.special_names["lmkit_family"] : Json();
    t.special_names = Json::object();
    if (!family_only.is_null()) t.special_names["lmkit_family"] = family_only;
  }
  return t;
}

}  // namespace lmkit::tokenizer
