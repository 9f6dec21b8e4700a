// HuggingFace tokenizer files (the tokenizers library's tokenizer.json schema,
// transformers' tokenizer_config.json / special_tokens_map.json, and the older
// vocab.txt, vocab.json + merges.txt, spiece.model layouts).
#include "lmkit/tokenizer/hf.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/families.h"
#include "lmkit/tokenizer/unicode.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {
namespace {

const std::string kMetaspace = "\xE2\x96\x81";  // "▁"

// The files a HF tokenizer directory may hold, kept verbatim when lmkit saves it again.
const char* const kHfFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                                "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "tokenizer.model"};

std::string base64_decode(const std::string& in, const std::string& what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n') continue;
    const int v = value(c);
    if (v < 0) throw InputError(what + ": precompiled_charsmap is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v), bits += 6;
    if (bits >= 8) bits -= 8, out.push_back(static_cast<char>((acc >> bits) & 0xFF));
  }
  return out;
}

std::string base64_encode(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 | static_cast<unsigned char>(in[i + 2]);
    for (int k = 3; k >= 0; --k) out.push_back(kAlphabet[(v >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]), out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// A special token's name in transformers' files: a string, or {"content": ...}.
std::optional<std::string> token_name(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
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
  for (const auto& [piece, id] : vocab.items()) out[static_cast<size_t>(id.get<int64_t>())] = piece;
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_merges(const Json& merges, const std::string& what) {
  if (!merges.is_array()) throw InputError(what + ": BPE 'merges' is not a list");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    if (m.is_string()) {  // "a b" (tokenizers < 0.20)
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 >= s.size()) {
        throw InputError(what + ": merge " + std::to_string(i + 1) + " '" + s + "' is not two tokens");
      }
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      throw InputError(what + ": merge " + std::to_string(i + 1) + " is not a pair of tokens");
    }
  }
  return out;
}

void template_item(const Json& item, const Json& special_tokens, const std::string& what,
                   std::vector<Template::Item>& out) {
  Template::Item r;
  if (item.contains("Sequence")) {
    r.sequence = item["Sequence"].value("id", "A") == "B" ? 1 : 0;
    r.type_id = item["Sequence"].value("type_id", 0);
    out.push_back(r);
  } else if (item.contains("SpecialToken")) {
    const std::string name = item["SpecialToken"].value("id", "");
    r.type_id = item["SpecialToken"].value("type_id", 0);
    if (!special_tokens.contains(name)) throw InputError(what + ": the template uses '" + name + "', which it does not define");
    for (const auto& id : special_tokens[name].value("ids", Json::array())) {
      r.id = id.get<int32_t>();
      out.push_back(r);
    }
  } else {
    throw InputError(what + ": unknown template piece " + brief_json(item));
  }
}

// HF's post-processor as a template; false when it adds nothing (ByteLevel, null).
bool parse_post_processor(const Json& pp, Template& t, const std::string& what) {
  using Item = Template::Item;
  const std::string type = type_of(pp);
  if (type == "Sequence") {
    for (const auto& p : pp.value("processors", Json::array())) {
      if (parse_post_processor(p, t, what)) return true;
    }
    return false;
  }
  if (type == "null" || type == "ByteLevel") return false;
  if (type == "TemplateProcessing") {
    const Json& specials = pp.value("special_tokens", Json::object());
    for (const auto& item : need(pp, "single", what)) template_item(item, specials, what, t.single);
    for (const auto& item : need(pp, "pair", what)) template_item(item, specials, what, t.pair);
    return true;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const int32_t sep = need(pp, "sep", what).at(1).get<int32_t>(), cls = need(pp, "cls", what).at(1).get<int32_t>();
    t.single = {Item{cls, 0, 0}, Item{-1, 0, 0}, Item{sep, 0, 0}};
    if (type == "BertProcessing") t.pair = {Item{cls, 0, 0}, Item{-1, 0, 0}, Item{sep, 0, 0}, Item{-1, 1, 1}, Item{sep, 0, 1}};
    else t.pair = {Item{cls, 0, 0}, Item{-1, 0, 0}, Item{sep, 0, 0}, Item{sep, 0, 0}, Item{-1, 1, 0}, Item{sep, 0, 0}};
    return true;
  }
  throw InputError(what + ": post-processor '" + type + "' is not supported (TemplateProcessing, BertProcessing, "
                   "RobertaProcessing, ByteLevel)");
}

// transformers' tokenizer_config.json and special_tokens_map.json, merged (the config wins).
Json read_config(const fs::path& dir, const std::string& model_file = "") {
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

std::vector<AddedToken> parse_added_tokens(const Json& list, const std::string& what) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  if (!list.is_array()) throw InputError(what + ": 'added_tokens' is not a list");
  for (const auto& a : list) {
    AddedToken t;
    t.content = need(a, "content", what).get<std::string>();
    t.id = need(a, "id", what).get<int32_t>();
    t.special = flag(a, "special", false, what), t.lstrip = flag(a, "lstrip", false, what), t.rstrip = flag(a, "rstrip", false, what);
    t.single_word = flag(a, "single_word", false, what);
    if (t.content.empty() || t.id < 0) throw InputError(what + ": an added token has no content or a negative id");
    out.push_back(t);
  }
  return out;
}

// A Unigram tokenizer.json as a SentencePiece model (what HF converted it from):
// T5's (Precompiled normalizer, WhitespaceSplit + Metaspace) or lmkit's own
// (Prepend + Replace, no pre-tokenizer). Sentinels <extra_id_N> at the top stay out.
// A Replace normalizer's {"pattern": {KIND: text}}; "" when it has none of that kind.
// (A const Json's operator[] on a missing key is undefined: the fuzzer found one.)
std::string replace_pattern(const Json& n, const char* kind) {
  if (!n.contains("pattern") || !n["pattern"].is_object()) return "";
  const Json& pattern = n["pattern"];
  return pattern.contains(kind) && pattern[kind].is_string() ? pattern[kind].get<std::string>() : "";
}

std::string unigram_as_sentencepiece(const Json& j, const std::vector<AddedToken>& added, const std::string& what) {
  const Json& model = j["model"];
  SpmModel m;
  m.model_type = 1;
  m.byte_fallback = flag(model, "byte_fallback", false, what);
  m.add_dummy_prefix = false, m.remove_extra_whitespaces = false, m.escape_whitespaces = true;
  m.normalizer_name = "identity";
  for (const auto& n : steps(j.value("normalizer", Json()), "normalizers")) {
    const std::string type = type_of(n);
    if (type == "Precompiled") {
      m.precompiled_charsmap = base64_decode(n.value("precompiled_charsmap", ""), what);
      m.normalizer_name = "nmt_nfkc";
    } else if (type == "Prepend" && n.value("prepend", "") == kMetaspace) {
      m.add_dummy_prefix = true;
    } else if (type == "Replace" && replace_pattern(n, "String") == " " && n.value("content", "") == kMetaspace) {
      // spaces become ▁: SentencePiece's escape_whitespaces
    } else if (type == "Replace" && replace_pattern(n, "Regex") == " {2,}" && n.value("content", "") == " ") {
      m.remove_extra_whitespaces = true;
    } else {
      throw InputError(what + ": Unigram with normalizer '" + type + "' is not supported (Precompiled, Prepend, Replace)");
    }
  }
  for (const auto& p : steps(j.value("pre_tokenizer", Json()), "pretokenizers")) {
    const std::string type = type_of(p);
    if (type == "WhitespaceSplit") m.remove_extra_whitespaces = true;
    else if (type == "Metaspace") m.add_dummy_prefix = m.add_dummy_prefix || p.value("prepend_scheme", "always") == "always" || flag(p, "add_prefix_space", false, what);
    else throw InputError(what + ": Unigram with pre-tokenizer '" + type + "' is not supported (WhitespaceSplit, Metaspace)");
  }
  const Json& vocab = need(model, "vocab", what);
  if (!vocab.is_array() || vocab.empty()) throw InputError(what + ": Unigram 'vocab' is not a list of [piece, score]");
  const int64_t unk = model.value("unk_id", Json()).is_number_integer() ? model["unk_id"].get<int64_t>() : -1;
  std::map<int32_t, bool> special;
  for (const auto& a : added) special[a.id] = a.special;
  size_t n = vocab.size();
  while (n > 0 && vocab[n - 1].is_array() && vocab[n - 1].size() == 2 && vocab[n - 1][0].is_string() &&
         vocab[n - 1][0].get<std::string>().rfind("<extra_id_", 0) == 0) {
    --n;
  }
  for (size_t id = 0; id < n; ++id) {
    const Json& e = vocab[id];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      throw InputError(what + ": Unigram vocabulary entry " + std::to_string(id) + " is not [piece, score]");
    }
    SpmModel::Piece p{e[0].get<std::string>(), e[1].get<float>(), SpmModel::kNormal};
    if (static_cast<int64_t>(id) == unk) p.type = SpmModel::kUnknown;
    else if (special.count(static_cast<int32_t>(id)) && special[static_cast<int32_t>(id)]) p.type = SpmModel::kControl;
    else if (m.byte_fallback && p.piece.size() == 6 && p.piece.rfind("<0x", 0) == 0 && p.piece.back() == '>') p.type = SpmModel::kByte;
    m.pieces.push_back(std::move(p));
  }
  if (unk < 0 || unk >= static_cast<int64_t>(n)) throw InputError(what + ": Unigram needs an 'unk_id' inside its vocabulary");
  return serialize_spm_model(m);
}

}  // namespace

// ---- loading ----------------------------------------------------------------

Tokenizer HfLoader::load_tokenizer_json(const fs::path& file, std::optional<Family> family) {
  const std::string what = file.string();
  const std::string bytes = read_file(what);  // the checksum's input, and what save() writes back
  const Json j = load_json_file(what);
  if (!j.is_object() || !j.contains("model")) throw InputError(what + ": not a HuggingFace tokenizer.json (no 'model')");
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  const bool directory_file = file.filename() == "tokenizer.json";
  Tokenizer t;
  t.source_ = what;
  t.checksum_ = fnv1a64(bytes);
  t.special_names_ = directory_file ? read_config(dir) : Json::object();
  t.added_ = parse_added_tokens(j.value("added_tokens", Json()), what);
  t.has_template_ = parse_post_processor(j.value("post_processor", Json()), t.template_, what);
  t.clean_up_spaces_ = flag(t.special_names_, "clean_up_tokenization_spaces", false, what);
  if (!t.has_template_) {
    // Nothing added: A, or A then B (token types 0 and 1).
    t.template_.single = {Template::Item{-1, 0, 0}};
    t.template_.pair = {Template::Item{-1, 0, 0}, Template::Item{-1, 1, 1}};
    t.has_template_ = true;
  }

  const Json& model = j["model"];
  const std::string type = type_of(model);
  const std::string normalizer = type_of(j.value("normalizer", Json()));
  if (type == "WordPiece") {
    WordPieceOptions o;
    if (normalizer == "BertNormalizer") {
      const Json& n = j["normalizer"];
      o.clean_text = flag(n, "clean_text", true, what), o.handle_chinese_chars = flag(n, "handle_chinese_chars", true, what);
      o.lowercase = flag(n, "lowercase", true, what);
      o.strip_accents = n.contains("strip_accents") && n["strip_accents"].is_boolean() ? n["strip_accents"].get<bool>() : o.lowercase;
    } else if (normalizer == "null") {
      o.normalize = false;
    } else {
      throw InputError(what + ": WordPiece with normalizer '" + normalizer + "' is not supported (BertNormalizer)");
    }
    const std::string pre = type_of(j.value("pre_tokenizer", Json()));
    if (pre != "BertPreTokenizer") throw InputError(what + ": WordPiece with pre-tokenizer '" + pre + "' is not supported (BertPreTokenizer)");
    o.unk_token = model.value("unk_token", "[UNK]");
    o.prefix = model.value("continuing_subword_prefix", "##");
    o.max_input_chars_per_word = model.value("max_input_chars_per_word", 100);
    const Json& decoder = j.value("decoder", Json());
    if (type_of(decoder) == "WordPiece") o.decoder_cleanup = flag(decoder, "cleanup", true, what);
    t.backend_ = make_wordpiece(vocab_by_id(need(model, "vocab", what), what), o);
  } else if (type == "BPE") {
    if (!model.contains("merges")) throw InputError(what + ": BPE model has no 'merges'");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
        throw InputError(what + ": BPE with '" + key + "' is not supported (byte-level BPE only)");
      }
    }
    if (flag(model, "byte_fallback", false, what)) throw InputError(what + ": BPE with byte_fallback is not supported (byte-level BPE only)");
    if (normalizer != "null") throw InputError(what + ": BPE with normalizer '" + normalizer + "' is not supported (byte-level BPE has none)");
    BpeOptions o;
    bool byte_level = false;
    for (const auto& p : steps(j.value("pre_tokenizer", Json()), "pretokenizers")) {
      const std::string pt = type_of(p);
      if (pt == "ByteLevel") {
        byte_level = true;
        o.add_prefix_space = flag(p, "add_prefix_space", false, what);
        if (!flag(p, "use_regex", true, what)) o.split_pattern.clear();
      } else if (pt == "Split" && p.contains("pattern") && p["pattern"].contains("Regex") &&
                 p.value("behavior", "") == "Isolated" && !flag(p, "invert", false, what)) {
        o.split_pattern = p["pattern"]["Regex"].get<std::string>();
      } else {
        throw InputError(what + ": BPE with pre-tokenizer '" + pt + "' is not supported (ByteLevel, Split)");
      }
    }
    if (!byte_level) throw InputError(what + ": BPE without a ByteLevel pre-tokenizer is not supported (byte-level BPE only)");
    if (o.split_pattern.empty()) throw InputError(what + ": a ByteLevel pre-tokenizer without a regex split is not supported");
    o.ignore_merges = flag(model, "ignore_merges", false, what);
    o.unk_token = model.value("unk_token", Json()).is_string() ? model["unk_token"].get<std::string>() : "";
    t.backend_ = make_byte_level_bpe(vocab_by_id(need(model, "vocab", what), what), parse_merges(model["merges"], what), o);
  } else if (type == "Unigram") {
    // The SentencePiece model HF converted from, when it is there; else rebuilt from the JSON.
    std::string spm;
    for (const char* name : {"spiece.model", "tokenizer.model"}) {
      if (directory_file && fs::is_regular_file(dir / name)) {
        spm = read_file((dir / name).string());
        break;
      }
    }
    if (spm.empty()) spm = unigram_as_sentencepiece(j, t.added_, what);
    t.backend_ = load_sentencepiece(spm, what);
    const Json& decoder = j.value("decoder", Json());
    t.metaspace_decoder_ = type_of(decoder) == "Metaspace" && decoder.value("prepend_scheme", "always") != "never";
  } else {
    throw InputError(what + ": model type '" + type + "' is not supported (WordPiece, BPE, Unigram)");
  }
  if (directory_file) {
    for (const char* name : kHfFiles) {
      if (fs::is_regular_file(dir / name)) t.hf_files_.emplace_back(name, read_file((dir / name).string()));
    }
  } else {
    t.hf_files_.emplace_back("tokenizer.json", bytes);
  }
  t.finish(family, what);
  return t;
}

Tokenizer HfLoader::load_sentencepiece_file(const fs::path& file, std::optional<Family> family) {
  const std::string what = file.string();
  Tokenizer t;
  t.model_bytes_ = read_file(what);
  t.checksum_ = fnv1a64(t.model_bytes_);
  t.source_ = what;
  t.backend_ = load_sentencepiece(t.model_bytes_, what);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  const fs::path meta = dir / (file.stem().string() + ".lmkit.json");
  if (fs::exists(meta)) {
    const Json m = load_json_file(meta.string());
    if (m.is_object() && m.contains("family") && m["family"].is_string()) t.special_names_["lmkit_family"] = m["family"];
  } else {
    t.special_names_ = read_config(dir, file.filename().string());
    // transformers' configs name their own special tokens; lmkit's families know theirs.
    // transformers converts a SentencePiece model it finds in a HF directory to a fast
    // tokenizer whose Metaspace decoder lmkit follows (T5's spiece.model).
    t.metaspace_decoder_ = t.special_names_.contains("tokenizer_class");
    if (!t.special_names_.contains("tokenizer_class")) {
      const Json family_only = t.special_names_.contains("lmkit_family") ? t.special_names_["lmkit_family"] : Json();
      t.special_names_ = Json::object();
      if (!family_only.is_null()) t.special_names_["lmkit_family"] = family_only;
    }
  }
  t.finish(family, what);
  return t;
}

Tokenizer HfLoader::load_directory(const fs::path& dir, std::optional<Family> family) {
  const std::string d = dir.string();
  if (fs::exists(dir / "tokenizer.lmkit.json")) {
    const Json m = load_json_file((dir / "tokenizer.lmkit.json").string());
    const std::string model = m.is_object() ? m.value("model_file", "tokenizer.model") : "tokenizer.model";
    if (!fs::is_regular_file(dir / model)) throw InputError(d + "/tokenizer.lmkit.json names " + model + ", which is missing");
    return load_sentencepiece_file(dir / model, family);
  }
  if (fs::exists(dir / "tokenizer.json")) return load_tokenizer_json(dir / "tokenizer.json", family);
  Json names = read_config(dir);
  Tokenizer t;
  auto keep = [&](std::initializer_list<const char*> files) {
    std::string all;
    for (const char* name : kHfFiles) {
      if (!fs::is_regular_file(dir / name)) continue;
      t.hf_files_.emplace_back(name, read_file((dir / name).string()));
      for (const char* f : files) {
        if (std::string(f) == name) all += std::string(name) + '\0' + t.hf_files_.back().second;
      }
    }
    t.checksum_ = fnv1a64(all);
  };
  if (fs::exists(dir / "vocab.txt")) {
    // BERT's slow-tokenizer layout: one piece per line, the line number is the id.
    std::vector<std::string> vocab;
    std::ifstream in(dir / "vocab.txt");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      vocab.push_back(line);
    }
    check_input(!vocab.empty(), d + "/vocab.txt: empty vocabulary");
    WordPieceOptions o;
    o.lowercase = flag(names, "do_lower_case", true, d + "/tokenizer_config.json");
    o.strip_accents = names.contains("strip_accents") && names["strip_accents"].is_boolean() ? names["strip_accents"].get<bool>() : o.lowercase;
    o.handle_chinese_chars = flag(names, "tokenize_chinese_chars", true, d + "/tokenizer_config.json");
    o.unk_token = names.contains("unk_token") && names["unk_token"].is_string() ? names["unk_token"].get<std::string>() : "[UNK]";
    t.backend_ = make_wordpiece(vocab, o);
    t.source_ = d + "/vocab.txt";
    keep({"vocab.txt"});
  } else if (fs::exists(dir / "vocab.json") || fs::exists(dir / "merges.txt")) {
    check_input(fs::exists(dir / "vocab.json"), d + ": merges.txt without vocab.json");
    check_input(fs::exists(dir / "merges.txt"), d + ": vocab.json without merges.txt (a BPE tokenizer needs its merges)");
    const std::string vocab_path = (dir / "vocab.json").string();
    const Json vocab = load_json_file(vocab_path);
    std::vector<std::pair<std::string, std::string>> merges;
    std::ifstream in(dir / "merges.txt");
    size_t line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 >= line.size()) {
        throw InputError(d + "/merges.txt:" + std::to_string(line_no) + ": not two tokens separated by a space");
      }
      merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
    BpeOptions o;
    o.add_prefix_space = flag(names, "add_prefix_space", false, d + "/tokenizer_config.json");
    t.backend_ = make_byte_level_bpe(vocab_by_id(vocab, vocab_path), merges, o);
    t.source_ = d + "/vocab.json + merges.txt";
    keep({"vocab.json", "merges.txt"});
  } else {
    for (const char* name : {"spiece.model", "tokenizer.model"}) {
      if (fs::is_regular_file(dir / name)) return load_sentencepiece_file(dir / name, family);
    }
    throw InputError(d + ": no tokenizer here (looked for tokenizer.json, vocab.txt, vocab.json + merges.txt, "
                     "spiece.model, tokenizer.model)");
  }
  t.clean_up_spaces_ = flag(names, "clean_up_tokenization_spaces", false, d + "/tokenizer_config.json");
  // transformers' defaults for the special tokens the config does not name.
  const bool wordpiece = t.backend_->format() == "wordpiece";
  const std::vector<std::pair<const char*, const char*>> defaults =
      wordpiece ? std::vector<std::pair<const char*, const char*>>{{"pad_token", "[PAD]"}, {"unk_token", "[UNK]"},
                                                                   {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"},
                                                                   {"mask_token", "[MASK]"}}
                : std::vector<std::pair<const char*, const char*>>{{"eos_token", "<|endoftext|>"}, {"bos_token", "<|endoftext|>"},
                                                                   {"unk_token", "<|endoftext|>"}};
  for (const auto& [key, value] : defaults) {
    if (!names.contains(key) && t.backend_->id_of(value) >= 0) names[key] = value;
  }
  if (!wordpiece) {
    // GPT-2's slow layout has no post-processor: a pair is A then B, nothing added.
    t.template_.single = {Template::Item{-1, 0, 0}};
    t.template_.pair = {Template::Item{-1, 0, 0}, Template::Item{-1, 1, 1}};
    t.has_template_ = true;
  }
  t.special_names_ = names;
  // The special tokens the config names, as transformers registers them.
  for (const auto& [key, value] : names.items()) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0 && value.is_string()) {
      const int32_t id = t.backend_->id_of(value.get<std::string>());
      const bool seen = std::any_of(t.added_.begin(), t.added_.end(), [&](const AddedToken& a) { return a.id == id; });
      if (id >= 0 && !seen) t.added_.push_back({value.get<std::string>(), id});
    }
  }
  t.finish(family, d);
  return t;
}

// ---- writing ----------------------------------------------------------------

HfFiles HfLoader::export_sentencepiece(const Tokenizer& tok, const std::string& model_file) {
  const SpmModel m = parse_spm_model(tok.model_bytes_, model_file);
  const auto& s = tok.specials();
  HfFiles out;
  Json& j = out.tokenizer;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  Json added = Json::array();
  std::vector<AddedToken> by_id = tok.added_;
  std::sort(by_id.begin(), by_id.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const auto& a : by_id) {
    added.push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  j["added_tokens"] = added;

  // Normalizer and pre-tokenizer: what SentencePiece does before its model runs.
  const Json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}};
  if (m.precompiled_charsmap.empty()) {
    Json normalizers = Json::array();
    if (m.add_dummy_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    if (m.remove_extra_whitespaces) normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
    normalizers.push_back(replace_space);
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    j["pre_tokenizer"] = nullptr;
  } else {
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(m.precompiled_charsmap)}};
    Json pre = Json::array();
    if (m.remove_extra_whitespaces) pre.push_back({{"type", "WhitespaceSplit"}});
    pre.push_back({{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", m.add_dummy_prefix ? "always" : "never"}, {"split", true}});
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", pre}};
  }

  // Post-processor: the tokenizer's template.
  Json specials = Json::object();
  auto items = [&](const std::vector<Template::Item>& list) {
    Json a = Json::array();
    for (const auto& item : list) {
      if (item.id >= 0) {
        const std::string p = tok.piece(item.id);
        a.push_back({{"SpecialToken", {{"id", p}, {"type_id", item.type_id}}}});
        specials[p] = {{"id", p}, {"ids", {item.id}}, {"tokens", {p}}};
      } else {
        a.push_back({{"Sequence", {{"id", item.sequence ? "B" : "A"}, {"type_id", item.type_id}}}});
      }
    }
    return a;
  };
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", items(tok.template_.single)},
                         {"pair", items(tok.template_.pair)}, {"special_tokens", specials}};

  // Decoder: ▁ back to spaces, byte pieces back to bytes, the dummy prefix off.
  Json decoders = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}}});
  if (m.byte_fallback) decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (m.add_dummy_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};

  // The model, with T5's sentinels appended as HF's T5 conversion does.
  const int64_t pieces = static_cast<int64_t>(m.pieces.size());
  int32_t unk = -1;
  for (int64_t id = 0; id < pieces; ++id) {
    if (m.pieces[static_cast<size_t>(id)].type == SpmModel::kUnknown) unk = static_cast<int32_t>(id);
  }
  if (m.model_type == 1) {
    Json vocab = Json::array();
    for (const auto& p : m.pieces) vocab.push_back({p.piece, p.type == SpmModel::kNormal || p.type == SpmModel::kUserDefined ? p.score : 0.0f});
    for (int32_t i = s.num_sentinels - 1; i >= 0; --i) vocab.push_back({"<extra_id_" + std::to_string(i) + ">", 0.0});
    j["model"] = {{"type", "Unigram"}, {"unk_id", unk}, {"vocab", vocab}, {"byte_fallback", m.byte_fallback}};
  } else if (m.model_type == 2) {
    // Merges as transformers' SentencePieceExtractor derives them: every split of a
    // piece into two pieces, ordered by the merged piece's id, then the halves' ids.
    std::map<std::string, int32_t> ids;
    for (int64_t id = 0; id < pieces; ++id) ids.emplace(m.pieces[static_cast<size_t>(id)].piece, static_cast<int32_t>(id));
    Json vocab = Json::object(), merges = Json::array();
    for (int64_t id = 0; id < pieces; ++id) {
      const std::string& piece = m.pieces[static_cast<size_t>(id)].piece;
      vocab[piece] = id;
      std::vector<std::tuple<int32_t, int32_t, std::string, std::string>> local;
      const std::u32string chars = unicode::decode_utf8(piece);
      for (size_t k = 1; k < chars.size(); ++k) {
        const std::string l = unicode::encode_utf8(std::u32string_view(chars).substr(0, k));
        const std::string r = unicode::encode_utf8(std::u32string_view(chars).substr(k));
        auto il = ids.find(l), ir = ids.find(r);
        if (il != ids.end() && ir != ids.end()) local.emplace_back(il->second, ir->second, l, r);
      }
      std::sort(local.begin(), local.end());
      for (const auto& [il, ir, l, r] : local) merges.push_back({l, r});
    }
    for (int32_t i = s.num_sentinels - 1; i >= 0; --i) vocab["<extra_id_" + std::to_string(i) + ">"] = tok.sentinel(i);
    j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", unk >= 0 ? Json(m.pieces[static_cast<size_t>(unk)].piece) : Json()},
                  {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                  {"byte_fallback", m.byte_fallback}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}};
  } else {
    throw InputError(model_file + ": SentencePiece model type " + std::to_string(m.model_type) +
                     " has no HuggingFace equivalent lmkit writes (unigram, bpe)");
  }

  // transformers' view: the generic fast tokenizer over tokenizer.json, with the special tokens named.
  Json names = Json::object();
  auto name = [&](const char* key, int32_t id) {
    if (id >= 0) names[key] = tok.piece(id);
  };
  name("pad_token", s.pad), name("unk_token", s.unk), name("cls_token", s.cls), name("sep_token", s.sep);
  name("mask_token", s.mask), name("eos_token", s.eos);
  const FamilySpec& spec = tok.family_spec();
  if (!spec.bos_key.empty()) name("bos_token", s.id(spec.bos_key));
  out.special_tokens_map = names;
  out.config = names;
  if (s.num_sentinels > 0) {
    Json sentinels = Json::array();
    for (int32_t i = 0; i < s.num_sentinels; ++i) sentinels.push_back("<extra_id_" + std::to_string(i) + ">");
    out.config["extra_ids"] = s.num_sentinels;
    out.config["additional_special_tokens"] = sentinels;
    out.special_tokens_map["additional_special_tokens"] = sentinels;
  }
  out.config["tokenizer_class"] = "PreTrainedTokenizerFast";
  out.config["clean_up_tokenization_spaces"] = false;
  out.config["model_input_names"] = spec.token_types ? Json::array({"input_ids", "token_type_ids", "attention_mask"})
                                                                   : Json::array({"input_ids", "attention_mask"});
  out.config["lmkit_family"] = tok.family();
  out.config["lmkit_model_file"] = model_file;
  return out;
}

}  // namespace lmkit::tokenizer
