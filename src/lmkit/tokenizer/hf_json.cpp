// tokenizer.json, the tokenizers library's schema: WordPiece (BERT), byte-level
// BPE (GPT-2, RoBERTa) and Unigram (T5, lmkit's SentencePiece exports).
#include <map>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/base64.h"
#include "lmkit/tokenizer/hf.h"
#include "lmkit/tokenizer/hf_schema.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {
namespace {

using hf::flag;
using hf::kMetaspace;
using hf::need;
using hf::steps;
using hf::type_of;
using hf::vocab_by_id;

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

// A Replace normalizer's {"pattern": {KIND: text}}; "" when it has none of that kind.
// (A const Json's operator[] on a missing key is undefined: the fuzzer found one.)
std::string replace_pattern(const Json& n, const char* kind) {
  if (!n.contains("pattern") || !n["pattern"].is_object()) return "";
  const Json& pattern = n["pattern"];
  return pattern.contains(kind) && pattern[kind].is_string() ? pattern[kind].get<std::string>() : "";
}

// A Unigram tokenizer.json as a SentencePiece model (what HF converted it from):
// T5's (Precompiled normalizer, WhitespaceSplit + Metaspace) or lmkit's own
// (Prepend + Replace, no pre-tokenizer). Sentinels <extra_id_N> at the top stay out.
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

std::shared_ptr<const Backend> wordpiece_backend(const Json& j, const std::string& what) {
  const Json& model = j["model"];
  const std::string normalizer = type_of(j.value("normalizer", Json()));
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
  return make_wordpiece(vocab_by_id(need(model, "vocab", what), what), o);
}

// The pre-tokenizer of a byte-level BPE: ByteLevel, with GPT-2's regex or a Split's.
BpeOptions byte_level_options(const Json& pre_tokenizer, const std::string& what) {
  BpeOptions o;
  bool byte_level = false;
  for (const auto& p : steps(pre_tokenizer, "pretokenizers")) {
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
  return o;
}

std::shared_ptr<const Backend> bpe_backend(const Json& j, const std::string& what) {
  const Json& model = j["model"];
  const std::string normalizer = type_of(j.value("normalizer", Json()));
  if (!model.contains("merges")) throw InputError(what + ": BPE model has no 'merges'");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      throw InputError(what + ": BPE with '" + key + "' is not supported (byte-level BPE only)");
    }
  }
  if (flag(model, "byte_fallback", false, what)) throw InputError(what + ": BPE with byte_fallback is not supported (byte-level BPE only)");
  if (normalizer != "null") throw InputError(what + ": BPE with normalizer '" + normalizer + "' is not supported (byte-level BPE has none)");
  BpeOptions o = byte_level_options(j.value("pre_tokenizer", Json()), what);
  o.ignore_merges = flag(model, "ignore_merges", false, what);
  o.unk_token = model.value("unk_token", Json()).is_string() ? model["unk_token"].get<std::string>() : "";
  return make_byte_level_bpe(vocab_by_id(need(model, "vocab", what), what), parse_merges(model["merges"], what), o);
}

// Unigram: the SentencePiece model HF converted from, when it is beside the file; else rebuilt from the JSON.
std::shared_ptr<const Backend> unigram_backend(const Json& j, const std::vector<AddedToken>& added,
                                               const fs::path* dir, const std::string& what) {
  std::string spm;
  for (const char* name : {"spiece.model", "tokenizer.model"}) {
    if (dir && fs::is_regular_file(*dir / name)) {
      spm = read_file((*dir / name).string());
      break;
    }
  }
  if (spm.empty()) spm = unigram_as_sentencepiece(j, added, what);
  return load_sentencepiece(spm, what);
}

}  // namespace

TokenizerParts read_tokenizer_json(const fs::path& file) {
  const std::string what = file.string();
  const std::string bytes = read_file(what);  // the checksum's input, and what save() writes back
  const Json j = load_json_file(what);
  if (!j.is_object() || !j.contains("model")) throw InputError(what + ": not a HuggingFace tokenizer.json (no 'model')");
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  const bool directory_file = file.filename() == "tokenizer.json";
  TokenizerParts t;
  t.source = what;
  t.checksum = fnv1a64(bytes);
  t.special_names = directory_file ? hf::read_config(dir) : Json::object();
  t.added = parse_added_tokens(j.value("added_tokens", Json()), what);
  Template pp;
  // Without a post-processor nothing is added: A, or A then B (token types 0 and 1).
  if (!parse_post_processor(j.value("post_processor", Json()), pp, what)) {
    pp.single = {Template::Item{-1, 0, 0}};
    pp.pair = {Template::Item{-1, 0, 0}, Template::Item{-1, 1, 1}};
  }
  t.post_processor = pp;
  t.clean_up_spaces = flag(t.special_names, "clean_up_tokenization_spaces", false, what);
  const std::string type = type_of(j["model"]);
  if (type == "WordPiece") {
    t.backend = wordpiece_backend(j, what);
  } else if (type == "BPE") {
    t.backend = bpe_backend(j, what);
  } else if (type == "Unigram") {
    t.backend = unigram_backend(j, t.added, directory_file ? &dir : nullptr, what);
    const Json& decoder = j.value("decoder", Json());
    t.metaspace_decoder = type_of(decoder) == "Metaspace" && decoder.value("prepend_scheme", "always") != "never";
  } else {
    throw InputError(what + ": model type '" + type + "' is not supported (WordPiece, BPE, Unigram)");
  }
  if (!directory_file) {
    t.hf_files.emplace_back("tokenizer.json", bytes);
    return t;
  }
  for (const auto& name : hf::directory_files()) {
    if (fs::is_regular_file(dir / name)) t.hf_files.emplace_back(name, read_file((dir / name).string()));
  }
  return t;
}

}  // namespace lmkit::tokenizer
