#include "lmkit/tokenizer/tokenizer.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/runtime.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/families.h"
#include "lmkit/tokenizer/hf.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {
namespace {

// transformers' clean_up_tokenization (applied to WordPiece output when the config asks for it).
std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","},
                                                               {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
                                                               {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    const std::string f = from, t = to;
    for (size_t pos = 0; (pos = s.find(f, pos)) != std::string::npos; pos += t.size()) s.replace(pos, f.size(), t);
  }
  return s;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

Family parse_family(const std::string& name) { return family_spec(name).name; }

namespace {

// The member of SpecialTokens HF's key names; nullptr for other keys.
int32_t SpecialTokens::*special_member(const std::string& key) {
  static const std::pair<const char*, int32_t SpecialTokens::*> kKeys[] = {
      {"pad_token", &SpecialTokens::pad}, {"unk_token", &SpecialTokens::unk},   {"cls_token", &SpecialTokens::cls},
      {"sep_token", &SpecialTokens::sep}, {"mask_token", &SpecialTokens::mask}, {"eos_token", &SpecialTokens::eos},
      {"bos_token", &SpecialTokens::bos}};
  for (const auto& [name, member] : kKeys) {
    if (key == name) return member;
  }
  return nullptr;
}

}  // namespace

int32_t* SpecialTokens::slot(const std::string& key) {
  const auto member = special_member(key);
  return member ? &(this->*member) : nullptr;
}

int32_t SpecialTokens::id(const std::string& key) const {
  const auto member = special_member(key);
  return member ? this->*member : -1;
}

const FamilySpec& Tokenizer::family_spec() const { return tokenizer::family_spec(family_); }

int64_t Template::added(bool is_pair) const {
  int64_t n = 0;
  for (const auto& item : is_pair ? pair : single) n += item.id >= 0;
  return n;
}

namespace {

// SentencePiece trainer arguments: exact round trips (no normalisation, whitespace
// kept), then the family's own, which place its special pieces and replace these.
std::vector<std::pair<std::string, std::string>> training_arguments(const TrainOptions& o, const FamilySpec& spec,
                                                                      const std::string& prefix) {
  std::string inputs;
  for (const auto& in : o.inputs) inputs += (inputs.empty() ? "" : ",") + in;
  std::vector<std::pair<std::string, std::string>> kw = {
      {"input", inputs},
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(o.vocab_size - spec.sentinels)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"hard_vocab_limit", "false"},
      {"num_threads", std::to_string(o.threads > 0 ? resolve_threads(o.threads) : TrainOptions::kTrainingThreads)},
      {"minloglevel", "2"},
      {"bos_id", "-1"},
  };
  for (const auto& argument : spec.training_arguments) {
    auto it = std::find_if(kw.begin(), kw.end(), [&](const auto& kv) { return kv.first == argument.first; });
    if (it != kw.end()) it->second = argument.second;
    else kw.push_back(argument);
  }
  return kw;
}

void check_training_options(const TrainOptions& o, const FamilySpec& spec) {
  check_input(!o.inputs.empty(), "tokenizer training: no input files");
  int64_t total_bytes = 0;
  for (const auto& in : o.inputs) {
    check_input(fs::is_regular_file(in), in + ": no such file");
    total_bytes += static_cast<int64_t>(fs::file_size(in));
  }
  check_input(total_bytes > 0, "tokenizer training: the input files are empty");
  check_input(!o.output.empty(), "--output must name a directory or a .model file");
  check_input(ends_with(o.output, ".model") || !fs::exists(o.output) || fs::is_directory(o.output),
              "--output '" + o.output + "' is a file: name a directory or a .model file");
  check_input(o.model_type == "unigram" || o.model_type == "bpe", "--model-type must be unigram or bpe");
  check_input(o.character_coverage >= 0.98 && o.character_coverage <= 1.0,
              "--character-coverage " + std::to_string(o.character_coverage) + ": SentencePiece takes 0.98 to 1");
  check_input(o.vocab_size > spec.sentinels + 16, "--vocab-size " + std::to_string(o.vocab_size) + " is too small");
}

}  // namespace

Tokenizer Tokenizer::train(const TrainOptions& o) {
  const FamilySpec& spec = tokenizer::family_spec(o.family);
  check_training_options(o, spec);
  const fs::path model_path = ends_with(o.output, ".model") ? fs::path(o.output) : fs::path(o.output) / "tokenizer.model";
  fs::create_directories(model_path.parent_path().empty() ? fs::path(".") : model_path.parent_path());
  const std::string prefix = model_path.string() + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  try {
    train_sentencepiece(training_arguments(o, spec, prefix), model_path.string());
  } catch (...) {
    fs::remove(prefix + ".model", ec), fs::remove(prefix + ".vocab", ec);
    throw;
  }
  fs::remove(prefix + ".vocab", ec);
  TokenizerParts parts;
  parts.model_bytes = read_file(prefix + ".model");
  fs::remove(prefix + ".model", ec);
  parts.backend = load_sentencepiece(parts.model_bytes, model_path.string());
  parts.checksum = fnv1a64(parts.model_bytes);
  parts.source = model_path.string();
  Tokenizer t = assemble(std::move(parts), spec.name, model_path.string());
  if (t.vocab_size() < o.vocab_size) {  // hard_vocab_limit false: SentencePiece stops where the text does
    std::fprintf(stderr, "warning: --vocab-size %lld: the training text gives %lld pieces, so the tokenizer has %lld "
                 "(SentencePiece learns no piece the text does not hold; more text gives more)\n",
                 static_cast<long long>(o.vocab_size), static_cast<long long>(t.vocab_size()),
                 static_cast<long long>(t.vocab_size()));
  }
  try {
    t.write_sentencepiece(model_path.string(), model_path.parent_path().string());
  } catch (...) {
    // A write that failed part of the way (a full disk, a file-size limit) leaves no half
    // tokenizer behind, which the next attempt would have had to --overwrite.
    const fs::path stem = model_path.parent_path() / model_path.stem();
    std::vector<fs::path> written = {model_path, stem.string() + ".lmkit.json", stem.string() + ".tokenizer.json"};
    if (model_path.filename() == "tokenizer.model") {
      for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
        written.push_back(model_path.parent_path() / f);
      }
    }
    for (const auto& f : written) fs::remove(f, ec);
    throw;
  }
  return t;
}

namespace {

// A directory: lmkit's SentencePiece files, HF's tokenizer.json, HF's older layouts, or a bare .model.
TokenizerParts read_directory(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.lmkit.json")) {
    const Json m = load_json_file((dir / "tokenizer.lmkit.json").string());
    const std::string model = m.is_object() ? m.value("model_file", "tokenizer.model") : "tokenizer.model";
    check_input(fs::is_regular_file(dir / model), dir.string() + "/tokenizer.lmkit.json names " + model + ", which is missing");
    return read_sentencepiece_file(dir / model);
  }
  if (fs::exists(dir / "tokenizer.json")) return read_tokenizer_json(dir / "tokenizer.json");
  if (auto parts = read_vocabulary_directory(dir)) return std::move(*parts);
  for (const char* name : {"spiece.model", "tokenizer.model"}) {
    if (fs::is_regular_file(dir / name)) return read_sentencepiece_file(dir / name);
  }
  throw InputError(dir.string() + ": no tokenizer here (looked for tokenizer.json, vocab.txt, vocab.json + merges.txt, "
                   "spiece.model, tokenizer.model)");
}

TokenizerParts read_path(const fs::path& p) {
  if (fs::is_directory(p)) return read_directory(p);
  if (!fs::is_regular_file(p)) throw InputError(p.string() + ": no such tokenizer (a directory, a .model file or a tokenizer.json)");
  const std::string name = p.filename().string();
  if (ends_with(name, ".json") && !ends_with(name, ".lmkit.json")) return read_tokenizer_json(p);
  if (name == "vocab.txt" || name == "merges.txt") return read_directory(p.parent_path().empty() ? fs::path(".") : p.parent_path());
  return read_sentencepiece_file(p);
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path, std::optional<Family> family) {
  try {
    TokenizerParts parts = read_path(fs::path(path));
    const std::string what = parts.source;
    return assemble(std::move(parts), family, what);
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong type where the readers take HF's files on trust (an id
    // that is a string, a vocabulary that is a list): one error naming the tokenizer.
    std::string message = e.what();
    if (message.rfind("[json.exception.", 0) == 0) message = message.substr(message.find(']') + 2);
    throw InputError(path + ": a tokenizer file holds a value of the wrong type or form (" + message.substr(0, 160) + ")");
  }
}

bool Tokenizer::present(const std::string& dir) {
  for (const char* name : {"tokenizer.lmkit.json", "tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model"}) {
    if (fs::is_regular_file(fs::path(dir) / name)) return true;
  }
  return false;
}

const Backend& Tokenizer::backend() const {
  // An empty tokenizer stands for none (an image model's tasks get it): text through it is a bug, said so.
  if (!parts_.backend) throw RuntimeError("no tokenizer: this model reads images, not text");
  return *parts_.backend;
}

Tokenizer Tokenizer::assemble(TokenizerParts parts, std::optional<Family> family, const std::string& what) {
  Tokenizer t;
  t.parts_ = std::move(parts);
  const FamilySpec& spec = tokenizer::family_spec(t.resolve_family(family, what));
  t.family_ = spec.name;
  t.resolve_specials(spec, what);
  t.resolve_sentinels(spec, what);
  t.register_added_tokens();
  // The template: the files', else the family's.
  t.template_ = t.parts_.post_processor ? *t.parts_.post_processor : spec.make_template(t.specials_);
  t.classify_ids();
  return t;
}

int32_t Tokenizer::id_of(const std::string& piece) const {
  for (const auto& a : parts_.added) {
    if (a.content == piece) return a.id;
  }
  return backend().id_of(piece);
}

// The family: given, else written down beside the model, else from the special pieces.
Family Tokenizer::resolve_family(std::optional<Family> family, const std::string& what) const {
  const Json& names = parts_.special_names;
  if (!family && names.contains("lmkit_family")) family = parse_family(names["lmkit_family"].get<std::string>());
  for (const auto& f : family_specs()) {
    if (!family && !f.detect_piece.empty() && id_of(f.detect_piece) >= 0) family = f.name;
  }
  if (!family) {
    throw InputError(what + ": no file names the model family and no special piece tells it ([CLS], <|endoftext|>, </s>, ...)");
  }
  return *family;
}

// Special token ids: HF's names for them, else the family's own pieces.
void Tokenizer::resolve_specials(const FamilySpec& spec, const std::string& what) {
  const Json& names = parts_.special_names;
  auto lookup = [&](const std::string& key, const std::string& fallback) -> int32_t {
    if (names.contains(key) && !names[key].is_string()) return -1;  // explicitly null
    const std::string n = names.contains(key) ? names[key].get<std::string>() : fallback;
    return n.empty() ? -1 : id_of(n);
  };
  SpecialTokens& s = specials_;
  for (const auto& [key, piece] : spec.specials) *s.slot(key) = lookup(key, piece);
  for (const auto& key : spec.optional) {
    if (names.contains(key)) *s.slot(key) = lookup(key, "");
  }
  std::string needed;
  bool missing = false;
  for (const auto& key : spec.required) {
    for (const auto& [k, piece] : spec.specials) {
      if (k == key) needed += (needed.empty() ? "" : " ") + piece;
    }
    missing = missing || s.id(key) < 0;
  }
  if (missing) throw InputError(what + ": not a " + spec.name + " tokenizer (needs " + needed + ")");
}

// Sentinels (T5): SentencePiece models leave them to lmkit (the top ids); HF files list
// them, and they must count down from the top. Sets the vocabulary size.
void Tokenizer::resolve_sentinels(const FamilySpec& spec, const std::string& what) {
  const Json& names = parts_.special_names;
  const int64_t pieces = backend().size();
  SpecialTokens& s = specials_;
  if (spec.sentinels > 0) {
    s.num_sentinels = names.contains("extra_ids") && names["extra_ids"].is_number_integer()
                          ? names["extra_ids"].get<int32_t>() : spec.sentinels;
    for (const auto& a : parts_.added) {
      if (a.content.rfind("<extra_id_", 0) == 0 && a.id >= pieces) s.num_sentinels = 0;
    }
  }
  vocab_size_ = pieces + s.num_sentinels;
  for (const auto& a : parts_.added) vocab_size_ = std::max<int64_t>(vocab_size_, a.id + 1);
  if (spec.sentinels == 0 || s.num_sentinels != 0) return;
  // HF's T5: <extra_id_i> = vocab_size - 1 - i, for every i it lists.
  for (const auto& a : parts_.added) {
    if (a.content.rfind("<extra_id_", 0) != 0) continue;
    const int32_t i = std::atoi(a.content.c_str() + 10);
    if (a.id != vocab_size_ - 1 - i) {
      throw InputError(what + ": " + a.content + " has id " + std::to_string(a.id) + ", expected " +
                       std::to_string(vocab_size_ - 1 - i) + " (sentinels count down from the top)");
    }
    s.num_sentinels = std::max(s.num_sentinels, i + 1);
  }
}

// Added tokens: matched in the raw text, longest first. SentencePiece models get
// the ones HF would register: control pieces, [UNK], padding and T5's sentinels.
void Tokenizer::register_added_tokens() {
  auto& added = parts_.added;
  const Backend& backend = this->backend();
  if (added.empty()) {
    for (int32_t id = 0; id < backend.size(); ++id) {
      if (backend.is_control(id) || id == specials_.unk || id == specials_.pad) added.push_back({backend.piece(id), id});
    }
    for (int32_t i = specials_.num_sentinels - 1; i >= 0; --i) {
      added.push_back({"<extra_id_" + std::to_string(i) + ">", static_cast<int32_t>(vocab_size_ - 1 - i)});
    }
  }
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  added_first_byte_.assign(256, false);
  for (const auto& a : added) added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
}

// Which ids are special (never masked, never a random replacement) and which start a word.
void Tokenizer::classify_ids() {
  const Backend& backend = this->backend();
  const int64_t pieces = backend.size();
  kind_.assign(static_cast<size_t>(vocab_size_), 0);
  word_start_.assign(static_cast<size_t>(vocab_size_), 1);
  for (int64_t id = pieces; id < vocab_size_; ++id) kind_[static_cast<size_t>(id)] = 1;
  for (const auto& a : parts_.added) {
    if (a.special && a.id != specials_.unk) kind_[static_cast<size_t>(a.id)] = 1;
  }
  regular_.clear();
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const auto i = static_cast<size_t>(id);
    if (id < pieces) {
      // Unknown, byte and regular pieces are text; control pieces and padding are special.
      if (backend.is_control(id) || id == specials_.pad) kind_[i] = 1;
      word_start_[i] = kind_[i] || backend.starts_word(id);
      // Holes in a HF vocabulary are no token at all.
      if (!kind_[i] && backend.piece(id).empty()) kind_[i] = 1;
    }
    if (!kind_[i]) regular_.push_back(id);
  }
}

std::string Tokenizer::format() const { return backend().format(); }

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
  if (id >= backend().size()) {
    for (const auto& a : parts_.added) {
      if (a.id == id) return a.content;
    }
    return "<extra_id_" + std::to_string(vocab_size_ - 1 - id) + ">";
  }
  return backend().piece(id);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  // HF's added vocabulary: the leftmost, then longest, added token splits the text.
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    const AddedToken* hit = nullptr;
    if (!added_first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    for (const auto& a : parts_.added) {
      if (text.compare(pos, a.content.size(), a.content) != 0) continue;
      if (a.single_word) {
        const bool left_ok = pos == 0 || !std::isalnum(static_cast<unsigned char>(text[pos - 1]));
        const size_t end = pos + a.content.size();
        const bool right_ok = end >= text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
        if (!left_ok || !right_ok) continue;
      }
      hit = &a;
      break;
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t seg_end = pos;
    if (hit->lstrip) {
      while (seg_end > start && is_space(text[seg_end - 1])) --seg_end;
    }
    if (seg_end > start) encode_segment(text.substr(start, seg_end - start), start == 0, ids);
    ids.push_back(hit->id);
    pos += hit->content.size();
    if (hit->rstrip) {
      while (pos < text.size() && is_space(text[pos])) ++pos;
    }
    start = pos;
  }
  if (start < text.size()) encode_segment(text.substr(start), start == 0, ids);
  return ids;
}

void Tokenizer::encode_segment(std::string_view text, bool first, std::vector<int32_t>& ids) const {
  using Prepend = TokenizerParts::Prepend;
  const Prepend p = parts_.metaspace_prepend;
  if (p == Prepend::kNone || (p == Prepend::kFirst && !first) || text.front() == ' ') {
    backend().encode(text, ids);
  } else {
    backend().encode(" " + std::string(text), ids);
  }
}

Encoding Tokenizer::apply_template(const std::vector<int32_t>& a, const std::vector<int32_t>* b) const {
  Encoding e;
  for (const auto& item : b ? template_.pair : template_.single) {
    if (item.id >= 0) {
      e.ids.push_back(item.id), e.type_ids.push_back(item.type_id);
    } else {
      const auto& seq = item.sequence == 0 ? a : *b;
      e.ids.insert(e.ids.end(), seq.begin(), seq.end());
      e.type_ids.insert(e.type_ids.end(), seq.size(), item.type_id);
    }
  }
  return e;
}

Encoding Tokenizer::encode_pair(std::string_view a, std::optional<std::string_view> b) const {
  const auto ia = encode(a);
  if (!b) return apply_template(ia, nullptr);
  const auto ib = encode(*b);
  return apply_template(ia, &ib);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool keep_special) const {
  std::string out;
  std::vector<int32_t> run;  // consecutive ordinary pieces, decoded together
  size_t decoded = 0;        // pieces decoded so far
  auto flush = [&] {
    if (run.empty()) return;
    if (parts_.metaspace_decoder) {
      // HF's Metaspace decoder: ▁ is a space, except in the first token, where it is dropped.
      for (int32_t id : run) {
        const std::string p = backend().piece(id);
        for (size_t k = 0; k < p.size();) {
          if (p.compare(k, 3, "\xE2\x96\x81") == 0) {
            if (decoded != 0) out += ' ';
            k += 3;
          } else {
            out += p[k++];
          }
        }
        ++decoded;
      }
    } else {
      out += backend().decode(run);
      decoded += run.size();
    }
    run.clear();
  };
  const int64_t pieces = backend().size();
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
    const bool sentinel = specials_.num_sentinels > 0 && id >= vocab_size_ - specials_.num_sentinels;
    if (sentinel || id >= pieces) {
      flush();
      out += piece(id);
    } else if (is_special(id) || id == specials_.unk) {
      if (keep_special) flush(), out += piece(id);
    } else {
      run.push_back(id);
    }
  }
  flush();
  if (parts_.strip_leading_space && !out.empty() && out.front() == ' ') out.erase(0, 1);
  if (parts_.clean_up_spaces && backend().format() == "wordpiece") out = clean_up_tokenization(std::move(out));
  return out;
}

std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (is_special(id)) out.push_back(id);
  }
  return out;
}

int32_t Tokenizer::sentinel(int32_t i) const {
  check_input(i >= 0 && i < specials_.num_sentinels, "sentinel " + std::to_string(i) + " does not exist");
  return static_cast<int32_t>(vocab_size_ - 1 - i);
}

Json Tokenizer::config_json() const {
  const auto& s = specials_;
  Json special = Json::object();
  auto add = [&](const char* name, int32_t id) {
    if (id >= 0) special[name] = {{"id", id}, {"piece", piece(id)}};
  };
  add("pad", s.pad), add("unk", s.unk), add("cls", s.cls), add("sep", s.sep), add("mask", s.mask), add("eos", s.eos);
  return {{"family", family_},
          {"format", format()},
          {"vocab_size", vocab_size_},
          {"pieces", backend().size()},
          {"num_sentinels", s.num_sentinels},
          {"special_tokens", special},
          {"checksum", parts_.checksum}};
}

void Tokenizer::save(const std::string& dir) const {
  backend();  // the empty tokenizer has nothing to write
  fs::create_directories(dir);
  if (!parts_.hf_files.empty()) {
    for (const auto& [name, bytes] : parts_.hf_files) write_file_atomic(dir + "/" + name, bytes);
    return;
  }
  write_sentencepiece(dir + "/tokenizer.model", dir);
}

void Tokenizer::write_sentencepiece(const std::string& model_path, const std::string& hf_dir) const {
  const fs::path model(model_path);
  const std::string stem = (model.parent_path() / model.stem()).string();
  write_file_atomic(model_path, parts_.model_bytes);
  Json meta = config_json();
  meta["model_file"] = model.filename().string();
  save_json_file(stem + ".lmkit.json", meta);
  const HfFiles hf = export_sentencepiece(*this, model.filename().string());
  const std::string dir = hf_dir.empty() ? "." : hf_dir;
  if (model.filename() != "tokenizer.model") {
    // PATH.model: its own single-file tokenizer.json, so that several tokenizers can share a folder.
    save_json_file(stem + ".tokenizer.json", hf.tokenizer);
    const fs::path shared = fs::path(dir) / "tokenizer_config.json";
    if (fs::exists(shared)) {
      try {
        const Json previous = load_json_file(shared.string());
        const std::string owner = previous.value("lmkit_model_file", "");
        if (!owner.empty() && owner != model.filename().string()) {
          std::fprintf(stderr, "note: %s/tokenizer.json (what AutoTokenizer loads) now describes %s; %s stays loadable "
                       "as %s or %s.tokenizer.json\n", dir.c_str(), model.filename().c_str(), owner.c_str(),
                       owner.c_str(), owner.substr(0, owner.size() - 6).c_str());
        }
      } catch (const Error&) {
      }
    }
  }
  save_json_file(dir + "/tokenizer.json", hf.tokenizer);
  save_json_file(dir + "/tokenizer_config.json", hf.config);
  save_json_file(dir + "/special_tokens_map.json", hf.special_tokens_map);
}

}  // namespace lmkit::tokenizer
