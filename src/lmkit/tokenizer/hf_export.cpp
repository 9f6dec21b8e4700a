// The files that let transformers' AutoTokenizer load a SentencePiece model lmkit
// trained: tokenizer.json (HF's conversion of the model), tokenizer_config.json and
// special_tokens_map.json.
#include <algorithm>
#include <map>
#include <tuple>

#include "lmkit/core/error.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/base64.h"
#include "lmkit/tokenizer/families.h"
#include "lmkit/tokenizer/hf.h"
#include "lmkit/tokenizer/hf_schema.h"
#include "lmkit/tokenizer/unicode.h"

namespace lmkit::tokenizer {
namespace {

using hf::kMetaspace;

Json added_tokens_json(const Tokenizer& tok) {
  Json added = Json::array();
  std::vector<AddedToken> by_id = tok.added_tokens();
  std::sort(by_id.begin(), by_id.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const auto& a : by_id) {
    added.push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  return added;
}

// Normalizer and pre-tokenizer: what SentencePiece does before its model runs.
void set_normalizer(const SpmModel& m, Json& j) {
  if (m.precompiled_charsmap.empty()) {
    Json normalizers = Json::array();
    if (m.add_dummy_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    if (m.remove_extra_whitespaces) normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    j["pre_tokenizer"] = nullptr;
    return;
  }
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(m.precompiled_charsmap)}};
  Json pre = Json::array();
  if (m.remove_extra_whitespaces) pre.push_back({{"type", "WhitespaceSplit"}});
  pre.push_back({{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", m.add_dummy_prefix ? "always" : "never"}, {"split", true}});
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", pre}};
}

// The tokenizer's template as a TemplateProcessing post-processor.
Json post_processor_json(const Tokenizer& tok) {
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
  const Template& t = tok.post_processor();
  Json single = items(t.single), pair = items(t.pair);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

// ▁ back to spaces, byte pieces back to bytes, the dummy prefix off.
Json decoder_json(const SpmModel& m) {
  Json decoders = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}}});
  if (m.byte_fallback) decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (m.add_dummy_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", decoders}};
}

// Merges as transformers' SentencePieceExtractor derives them: every split of a
// piece into two pieces, ordered by the merged piece's id, then the halves' ids.
Json bpe_merges(const SpmModel& m) {
  std::map<std::string, int32_t> ids;
  for (size_t id = 0; id < m.pieces.size(); ++id) ids.emplace(m.pieces[id].piece, static_cast<int32_t>(id));
  Json merges = Json::array();
  for (const auto& p : m.pieces) {
    std::vector<std::tuple<int32_t, int32_t, std::string, std::string>> local;
    const std::u32string chars = unicode::decode_utf8(p.piece);
    for (size_t k = 1; k < chars.size(); ++k) {
      const std::string l = unicode::encode_utf8(std::u32string_view(chars).substr(0, k));
      const std::string r = unicode::encode_utf8(std::u32string_view(chars).substr(k));
      auto il = ids.find(l), ir = ids.find(r);
      if (il != ids.end() && ir != ids.end()) local.emplace_back(il->second, ir->second, l, r);
    }
    std::sort(local.begin(), local.end());
    for (const auto& [il, ir, l, r] : local) merges.push_back({l, r});
  }
  return merges;
}

// The model, with T5's sentinels appended as HF's T5 conversion does.
Json model_json(const SpmModel& m, const Tokenizer& tok, const std::string& model_file) {
  const int32_t sentinels = tok.specials().num_sentinels;
  int32_t unk = -1;
  for (size_t id = 0; id < m.pieces.size(); ++id) {
    if (m.pieces[id].type == SpmModel::kUnknown) unk = static_cast<int32_t>(id);
  }
  if (m.model_type == 1) {
    Json vocab = Json::array();
    for (const auto& p : m.pieces) vocab.push_back({p.piece, p.type == SpmModel::kNormal || p.type == SpmModel::kUserDefined ? p.score : 0.0f});
    for (int32_t i = sentinels - 1; i >= 0; --i) vocab.push_back({"<extra_id_" + std::to_string(i) + ">", 0.0});
    return {{"type", "Unigram"}, {"unk_id", unk}, {"vocab", vocab}, {"byte_fallback", m.byte_fallback}};
  }
  if (m.model_type != 2) {
    throw InputError(model_file + ": SentencePiece model type " + std::to_string(m.model_type) +
                     " has no HuggingFace equivalent lmkit writes (unigram, bpe)");
  }
  Json vocab = Json::object();
  for (size_t id = 0; id < m.pieces.size(); ++id) vocab[m.pieces[id].piece] = id;
  for (int32_t i = sentinels - 1; i >= 0; --i) vocab["<extra_id_" + std::to_string(i) + ">"] = tok.sentinel(i);
  return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", unk >= 0 ? Json(m.pieces[static_cast<size_t>(unk)].piece) : Json()},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
          {"byte_fallback", m.byte_fallback}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", bpe_merges(m)}};
}

// transformers' view: the generic fast tokenizer over tokenizer.json, with the special tokens named.
void set_transformers_configs(const Tokenizer& tok, const std::string& model_file, HfFiles& out) {
  const auto& s = tok.specials();
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
}

}  // namespace

HfFiles export_sentencepiece(const Tokenizer& tok, const std::string& model_file) {
  const SpmModel m = parse_spm_model(tok.sentencepiece_model(), model_file);
  HfFiles out;
  Json& j = out.tokenizer;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added_tokens_json(tok);
  set_normalizer(m, j);
  j["post_processor"] = post_processor_json(tok);
  j["decoder"] = decoder_json(m);
  j["model"] = model_json(m, tok, model_file);
  set_transformers_configs(tok, model_file, out);
  return out;
}

}  // namespace lmkit::tokenizer
