// tokenizer.json, the tokenizers library's schema: WordPiece (BERT), byte-level
// BPE (GPT-2, RoBERTa) and Unigram (T5, lmkit's SentencePiece exports).
#include <cstdio>
#include <map>
#include <set>

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
    t.special = flag(a, "special", false, what);
    t.lstrip = flag(a, "lstrip", false, what);
    t.rstrip = flag(a, "rstrip", false, what);
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

// The normalizer and pre-tokenizer steps HF's SentencePiece conversion writes, as the
// SpmModel's flags: T5's (Precompiled normalizer, WhitespaceSplit + Metaspace), Llama's
// (a Metaspace pre-tokenizer, or the older Prepend + Replace normalizer) and lmkit's own.
void read_spm_text_steps(const Json& j, SpmModel& m, const std::string& kind, const std::string& what) {
  m.add_dummy_prefix = false;
  m.remove_extra_whitespaces = false;
  m.escape_whitespaces = true;
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
      throw InputError(what + ": " + kind + " with normalizer '" + type + "' is not supported (Precompiled, Prepend, Replace)");
    }
  }
  for (const auto& p : steps(j.value("pre_tokenizer", Json()), "pretokenizers")) {
    const std::string type = type_of(p);
    if (type == "WhitespaceSplit") m.remove_extra_whitespaces = true;
    else if (type == "Metaspace") m.add_dummy_prefix = m.add_dummy_prefix || p.value("prepend_scheme", "always") != "never" || flag(p, "add_prefix_space", false, what);
    else throw InputError(what + ": " + kind + " with pre-tokenizer '" + type + "' is not supported (WhitespaceSplit, Metaspace)");
  }
}

// A piece's SentencePiece type: unknown, byte (<0xNN> with byte fallback), control (a
// special added token) or normal.
int spm_piece_type(const SpmModel& m, const std::string& piece, int64_t id, int64_t unk, const std::map<int32_t, bool>& special) {
  const auto it = special.find(static_cast<int32_t>(id));
  if (id == unk) return SpmModel::kUnknown;
  // A byte piece stays one even where a file lists it among its special tokens.
  if (m.byte_fallback && piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>') return SpmModel::kByte;
  if (it != special.end() && it->second) return SpmModel::kControl;
  return SpmModel::kNormal;
}

std::map<int32_t, bool> special_ids(const std::vector<AddedToken>& added) {
  std::map<int32_t, bool> special;
  for (const auto& a : added) special[a.id] = a.special;
  return special;
}

// A Unigram tokenizer.json as a SentencePiece model (what HF converted it from).
// Sentinels <extra_id_N> at the top stay out.
std::string unigram_as_sentencepiece(const Json& j, const std::vector<AddedToken>& added, const std::string& what) {
  const Json& model = j["model"];
  SpmModel m;
  m.model_type = 1;
  m.byte_fallback = flag(model, "byte_fallback", false, what);
  read_spm_text_steps(j, m, "Unigram", what);
  const Json& vocab = need(model, "vocab", what);
  if (!vocab.is_array() || vocab.empty()) throw InputError(what + ": Unigram 'vocab' is not a list of [piece, score]");
  const int64_t unk = model.value("unk_id", Json()).is_number_integer() ? model["unk_id"].get<int64_t>() : -1;
  const auto special = special_ids(added);
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
    const std::string piece = e[0].get<std::string>();
    m.pieces.push_back({piece, e[1].get<float>(), spm_piece_type(m, piece, static_cast<int64_t>(id), unk, special)});
  }
  if (unk < 0 || unk >= static_cast<int64_t>(n)) throw InputError(what + ": Unigram needs an 'unk_id' inside its vocabulary");
  return serialize_spm_model(m);
}

// A BPE tokenizer.json with byte fallback (Llama's, Mistral's) as the SentencePiece BPE
// model HF converted it from. SentencePiece merges the adjacent pair whose union scores
// highest; HF the pair of lowest rank: a piece scores minus the rank of the merge that makes it.
std::string bpe_as_sentencepiece(const Json& j, const std::vector<AddedToken>& added, const std::string& what) {
  const Json& model = j["model"];
  SpmModel m;
  m.model_type = 2;
  m.byte_fallback = true;
  read_spm_text_steps(j, m, "BPE with byte_fallback", what);
  const std::vector<std::string> pieces = vocab_by_id(need(model, "vocab", what), what);
  // SentencePiece holds one piece per id, 0 to the last, and falls back to the 256 byte pieces.
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (pieces[id].empty()) {
      throw InputError(what + ": the BPE vocabulary has no piece with id " + std::to_string(id) +
                       " (ids must run from 0 to " + std::to_string(pieces.size() - 1) + " without a gap)");
    }
  }
  {
    std::set<std::string> have(pieces.begin(), pieces.end());
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (!have.count(name)) {
        throw InputError(what + ": BPE with byte_fallback needs the 256 byte pieces <0x00> to <0xFF>; " + name +
                         " is not in the vocabulary");
      }
    }
  }
  const auto merges = parse_merges(need(model, "merges", what), what);
  std::map<std::string, float> score;
  for (size_t r = merges.size(); r-- > 0;) score[merges[r].first + merges[r].second] = -static_cast<float>(r);
  const std::string unk_piece = model.value("unk_token", Json()).is_string() ? model["unk_token"].get<std::string>() : "<unk>";
  int64_t unk = -1;
  for (size_t id = 0; id < pieces.size() && unk < 0; ++id) unk = pieces[id] == unk_piece ? static_cast<int64_t>(id) : -1;
  if (unk < 0) throw InputError(what + ": BPE with byte_fallback needs its unknown piece '" + unk_piece + "' in the vocabulary");
  const auto special = special_ids(added);
  for (size_t id = 0; id < pieces.size(); ++id) {
    const auto it = score.find(pieces[id]);
    m.pieces.push_back({pieces[id], it == score.end() ? 0.0f : it->second,
                        spm_piece_type(m, pieces[id], static_cast<int64_t>(id), unk, special)});
  }
  return serialize_spm_model(m);
}

std::shared_ptr<const Backend> wordpiece_backend(const Json& j, const std::string& what) {
  const Json& model = j["model"];
  const std::string normalizer = type_of(j.value("normalizer", Json()));
  WordPieceOptions o;
  if (normalizer == "BertNormalizer") {
    const Json& n = j["normalizer"];
    o.clean_text = flag(n, "clean_text", true, what);
    o.handle_chinese_chars = flag(n, "handle_chinese_chars", true, what);
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

// HF's tokenizers runs a Split's regex on Oniguruma, where a class may hold a class:
// [^(\s|[.,!?])] is one set, the union (BLOOM's). PCRE2 reads the inner '[' as a
// character and the first ']' as the end, so the inner brackets come out here.
std::string flatten_nested_classes(const std::string& pattern, const std::string& what) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      out += pattern.substr(i, 2), ++i;
      continue;
    }
    const bool opens_body = !out.empty() && (out.back() == '[' || (out.size() > 1 && out.back() == '^' && out[out.size() - 2] == '['));
    if (c == '[' && depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // POSIX [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      if (end == std::string::npos) throw InputError(what + ": pre-tokenizer regex '" + pattern + "': unterminated [:class:]");
      out += pattern.substr(i, end + 2 - i), i = end + 1;
    } else if (c == '[') {
      if (depth > 0 && i + 1 < pattern.size() && pattern[i + 1] == '^') {
        throw InputError(what + ": pre-tokenizer regex '" + pattern + "': a negated class inside a class is not supported");
      }
      if (depth++ == 0) out += c;
    } else if (c == ']' && depth > 0 && !opens_body) {
      if (--depth == 0) out += c;
    } else {
      out += c;
    }
  }
  return out;
}

// The pre-tokenizer of a byte-level BPE: ByteLevel with GPT-2's regex (use_regex), or a
// Split's regex before a ByteLevel without one (BLOOM's).
BpeOptions byte_level_options(const Json& pre_tokenizer, const std::string& what) {
  BpeOptions o;
  bool byte_level = false, gpt2_regex = false;
  std::string split;
  for (const auto& p : steps(pre_tokenizer, "pretokenizers")) {
    const std::string pt = type_of(p);
    if (pt == "ByteLevel") {
      byte_level = true;
      o.add_prefix_space = flag(p, "add_prefix_space", false, what);
      gpt2_regex = flag(p, "use_regex", true, what);
    } else if (pt == "Split" && p.contains("pattern") && p["pattern"].contains("Regex") &&
               p["pattern"]["Regex"].is_string() && p.value("behavior", "") == "Isolated" && !flag(p, "invert", false, what)) {
      split = flatten_nested_classes(p["pattern"]["Regex"].get<std::string>(), what);
    } else {
      throw InputError(what + ": BPE with pre-tokenizer '" + pt + "' is not supported (ByteLevel, Split)");
    }
  }
  if (!byte_level) throw InputError(what + ": BPE without a ByteLevel pre-tokenizer is not supported (byte-level BPE only)");
  if (!split.empty() && gpt2_regex) throw InputError(what + ": a Split before a ByteLevel with use_regex (two regex splits) is not supported");
  if (split.empty() && !gpt2_regex) throw InputError(what + ": a ByteLevel pre-tokenizer without a regex split is not supported");
  if (!split.empty()) o.split_pattern = split;  // else BpeOptions' default: GPT-2's
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
  // Llama's shape (a Metaspace pre-tokenizer or the Prepend/Replace normalizer) needs its byte pieces:
  // without byte_fallback it is neither that nor byte-level BPE, and the flag is what is wrong.
  const std::string pre = type_of(j.value("pre_tokenizer", Json()));
  if (normalizer != "null" || pre == "Metaspace") {
    const bool spm = pre == "Metaspace" || normalizer == "Sequence" || normalizer == "Prepend" || normalizer == "Replace";
    if (spm) {
      throw InputError(what + ": a SentencePiece-style BPE (" + (pre == "Metaspace" ? "Metaspace pre-tokenizer" : "normalizer '" + normalizer + "'") +
                       ") with byte_fallback false is not supported: lmkit reads it with byte_fallback true (Llama's, " +
                       "Mistral's), or byte-level BPE (GPT-2's, no normalizer)");
    }
    throw InputError(what + ": BPE with normalizer '" + normalizer + "' is not supported (byte-level BPE has none)");
  }
  BpeOptions o = byte_level_options(j.value("pre_tokenizer", Json()), what);
  o.ignore_merges = flag(model, "ignore_merges", false, what);
  o.unk_token = model.value("unk_token", Json()).is_string() ? model["unk_token"].get<std::string>() : "";
  return make_byte_level_bpe(vocab_by_id(need(model, "vocab", what), what), parse_merges(model["merges"], what), o);
}

// Unigram, or BPE with byte fallback: the SentencePiece model HF converted from, when it
// is beside the file; else rebuilt from the JSON.
// `no_dummy_prefix`: the model without SentencePiece's dummy prefix, which lmkit adds as
// HF's Metaspace pre-tokenizer does (TokenizerParts::metaspace_prepend).
std::shared_ptr<const Backend> sentencepiece_backend(const Json& j, const std::vector<AddedToken>& added,
                                                     const fs::path* dir, bool no_dummy_prefix, const std::string& what) {
  std::string spm;
  for (const char* name : {"spiece.model", "tokenizer.model"}) {
    if (dir && fs::is_regular_file(*dir / name)) {
      spm = read_file((*dir / name).string());
      break;
    }
  }
  if (spm.empty()) spm = type_of(j["model"]) == "Unigram" ? unigram_as_sentencepiece(j, added, what) : bpe_as_sentencepiece(j, added, what);
  if (no_dummy_prefix) {
    SpmModel m = parse_spm_model(spm, what);
    m.add_dummy_prefix = false;
    spm = serialize_spm_model(m);
  }
  return load_sentencepiece(spm, what);
}

// The prepend_scheme of a Metaspace pre-tokenizer ("" without one).
std::string metaspace_scheme(const Json& j) {
  for (const auto& p : steps(j.value("pre_tokenizer", Json()), "pretokenizers")) {
    if (type_of(p) == "Metaspace") return p.value("prepend_scheme", std::string("always"));
  }
  return "";
}

// Whether the decoder ends by stripping one leading space (HF's Strip, start 1: Llama's).
bool strips_leading_space(const Json& j) {
  for (const auto& d : steps(j.value("decoder", Json()), "decoders")) {
    if (type_of(d) == "Strip" && d.value("content", "") == " " && d.value("start", 0) == 1) return true;
  }
  return false;
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
  } else if (type == "BPE" && !flag(j["model"], "byte_fallback", false, what)) {
    t.backend = bpe_backend(j, what);
  } else if (type == "Unigram" || type == "BPE") {  // SentencePiece's: Unigram, or BPE with byte fallback
    // Llama's Metaspace prefixes a segment unless it starts with a space; SentencePiece always would.
    const std::string scheme = type == "BPE" ? metaspace_scheme(j) : "";
    t.backend = sentencepiece_backend(j, t.added, directory_file ? &dir : nullptr, !scheme.empty(), what);
    if (!scheme.empty()) {
      using Prepend = TokenizerParts::Prepend;
      t.metaspace_prepend = scheme == "never" ? Prepend::kNone : scheme == "first" ? Prepend::kFirst : Prepend::kAlways;
      t.strip_leading_space = strips_leading_space(j);
    }
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
