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

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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
      {"sep_token", &SpecialTokens::sep}, {"mask_token", &SpecialTokens::mask}, {"eos_token", &SpecialTokens::eos}};
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

Tokenizer Tokenizer::train(const TrainOptions& o) {
  check_input(!o.inputs.empty(), "tokenizer training: no input files");
  int64_t total_bytes = 0;
  for (const auto& in : o.inputs) {
    check_input(fs::is_regular_file(in), in + ": no such file");
    total_bytes += static_cast<int64_t>(fs::file_size(in));
  }
  check_input(total_bytes > 0, "tokenizer training: the input files are empty");
  check_input(!o.output.empty(), "--output must name a directory or a .model file");
  const bool model_file = ends_with(o.output, ".model");
  check_input(model_file || !fs::exists(o.output) || fs::is_directory(o.output),
              "--output '" + o.output + "' is a file: name a directory or a .model file");
  check_input(o.model_type == "unigram" || o.model_type == "bpe", "--model-type must be unigram or bpe");
  const FamilySpec& spec = tokenizer::family_spec(o.family);
  const int64_t reserved = spec.sentinels;
  check_input(o.vocab_size > reserved + 16, "--vocab-size " + std::to_string(o.vocab_size) + " is too small");

  const fs::path model_path = model_file ? fs::path(o.output) : fs::path(o.output) / "tokenizer.model";
  fs::create_directories(model_path.parent_path().empty() ? fs::path(".") : model_path.parent_path());
  std::string inputs;
  for (const auto& in : o.inputs) inputs += (inputs.empty() ? "" : ",") + in;
  const std::string prefix = model_path.string() + ".tmp" + std::to_string(::getpid());
  const int threads = resolve_threads(o.threads);
  std::vector<std::pair<std::string, std::string>> kw = {
      {"input", inputs},
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(o.vocab_size - reserved)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      // Exact round trips: no normalisation, whitespace kept as written.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"hard_vocab_limit", "false"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "2"},
      {"bos_id", "-1"},
  };
  // The family's arguments place its special pieces; they replace the defaults above (bos_id).
  for (const auto& argument : spec.training_arguments) {
    auto it = std::find_if(kw.begin(), kw.end(), [&](const auto& kv) { return kv.first == argument.first; });
    if (it != kw.end()) it->second = argument.second;
    else kw.push_back(argument);
  }
  std::error_code ec;
  try {
    train_sentencepiece(kw);
  } catch (...) {
    fs::remove(prefix + ".model", ec), fs::remove(prefix + ".vocab", ec);
    throw;
  }
  fs::remove(prefix + ".vocab", ec);
  Tokenizer t;
  t.model_bytes_ = read_file(prefix + ".model");
  fs::remove(prefix + ".model", ec);
  t.backend_ = load_sentencepiece(t.model_bytes_, model_path.string());
  t.checksum_ = fnv1a64(t.model_bytes_);
  t.source_ = model_path.string();
  t.finish(spec.name, model_path.string());
  t.write_sentencepiece(model_path.string(), model_path.parent_path().string());
  return t;
}

Tokenizer Tokenizer::load(const std::string& path, std::optional<Family> family) {
  const fs::path p(path);
  try {
    if (fs::is_directory(p)) return HfLoader::load_directory(p, family);
    if (!fs::is_regular_file(p)) throw InputError(path + ": no such tokenizer (a directory, a .model file or a tokenizer.json)");
    const std::string name = p.filename().string();
    if (ends_with(name, ".json") && !ends_with(name, ".lmkit.json")) return HfLoader::load_tokenizer_json(p, family);
    if (name == "vocab.txt" || name == "merges.txt") return HfLoader::load_directory(p.parent_path(), family);
    return HfLoader::load_sentencepiece_file(p, family);
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

void Tokenizer::finish(std::optional<Family> family, const std::string& what) {
  const int64_t pieces = backend_->size();
  // The family: given, else written down beside the model, else from the special pieces.
  auto id_of = [&](const std::string& piece) -> int32_t {
    for (const auto& a : added_) {
      if (a.content == piece) return a.id;
    }
    return backend_->id_of(piece);
  };
  if (!family && special_names_.contains("lmkit_family")) family = parse_family(special_names_["lmkit_family"].get<std::string>());
  for (const auto& f : family_specs()) {
    if (!family && !f.detect_piece.empty() && id_of(f.detect_piece) >= 0) family = f.name;
  }
  if (!family) {
    throw InputError(what + ": no file names the model family and no special piece tells it ([CLS], <|endoftext|>, </s>, ...)");
  }
  const FamilySpec& spec = tokenizer::family_spec(*family);
  family_ = spec.name;

  // Special token names: HF's files, else the family's own.
  auto name = [&](const std::string& key, const std::string& fallback) -> std::string {
    if (special_names_.contains(key) && special_names_[key].is_string()) return special_names_[key].get<std::string>();
    if (special_names_.contains(key)) return "";  // explicitly null
    return fallback;
  };
  auto lookup = [&](const std::string& key, const std::string& fallback) {
    const std::string n = name(key, fallback);
    return n.empty() ? -1 : id_of(n);
  };
  SpecialTokens& s = specials_;
  for (const auto& [key, piece] : spec.specials) *s.slot(key) = lookup(key, piece);
  for (const auto& key : spec.optional) {
    if (special_names_.contains(key)) *s.slot(key) = lookup(key, "");
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
  if (spec.sentinels > 0) {
    // Sentinels: SentencePiece models leave them to lmkit (the top ids); HF files list them.
    s.num_sentinels = special_names_.contains("extra_ids") && special_names_["extra_ids"].is_number_integer()
                          ? special_names_["extra_ids"].get<int32_t>() : spec.sentinels;
    for (const auto& a : added_) {
      if (a.content.rfind("<extra_id_", 0) == 0 && a.id >= pieces) s.num_sentinels = 0;
    }
  }
  vocab_size_ = pieces + s.num_sentinels;
  for (const auto& a : added_) vocab_size_ = std::max<int64_t>(vocab_size_, a.id + 1);
  if (spec.sentinels > 0 && s.num_sentinels == 0) {
    // HF's T5: <extra_id_i> = vocab_size - 1 - i, for every i it lists.
    for (const auto& a : added_) {
      if (a.content.rfind("<extra_id_", 0) != 0) continue;
      const int32_t i = std::atoi(a.content.c_str() + 10);
      if (a.id != vocab_size_ - 1 - i) {
        throw InputError(what + ": " + a.content + " has id " + std::to_string(a.id) + ", expected " +
                         std::to_string(vocab_size_ - 1 - i) + " (T5's sentinels count down from the top)");
      }
      s.num_sentinels = std::max(s.num_sentinels, i + 1);
    }
  }

  // Added tokens: matched in the raw text, longest first. SentencePiece models get
  // the ones HF would register: control pieces, [UNK], padding and T5's sentinels.
  if (added_.empty()) {
    for (int32_t id = 0; id < pieces; ++id) {
      if (backend_->is_control(id) || id == s.unk || id == s.pad) added_.push_back({backend_->piece(id), id});
    }
    for (int32_t i = s.num_sentinels - 1; i >= 0; --i) {
      added_.push_back({"<extra_id_" + std::to_string(i) + ">", static_cast<int32_t>(vocab_size_ - 1 - i)});
    }
  }
  std::stable_sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  added_first_byte_.assign(256, false);
  for (const auto& a : added_) added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;

  // The template: the files', else the family's.
  if (!has_template_) {
    template_ = spec.make_template(s);
    has_template_ = true;
  }

  kind_.assign(static_cast<size_t>(vocab_size_), 0);
  word_start_.assign(static_cast<size_t>(vocab_size_), 1);
  for (int64_t id = pieces; id < vocab_size_; ++id) kind_[static_cast<size_t>(id)] = 1;
  for (const auto& a : added_) {
    if (a.special && a.id != s.unk) kind_[static_cast<size_t>(a.id)] = 1;
  }
  regular_.clear();
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const auto i = static_cast<size_t>(id);
    if (id < pieces) {
      // Unknown, byte and regular pieces are text; control pieces and padding are special.
      if (backend_->is_control(id) || id == s.pad) kind_[i] = 1;
      word_start_[i] = kind_[i] || backend_->starts_word(id);
      // Holes in a HF vocabulary are no token at all.
      if (!kind_[i] && backend_->piece(id).empty()) kind_[i] = 1;
    }
    if (!kind_[i]) regular_.push_back(id);
  }
}

std::string Tokenizer::format() const { return backend_->format(); }

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
  if (id >= backend_->size()) {
    for (const auto& a : added_) {
      if (a.id == id) return a.content;
    }
    return "<extra_id_" + std::to_string(vocab_size_ - 1 - id) + ">";
  }
  return backend_->piece(id);
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
    for (const auto& a : added_) {
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
    if (seg_end > start) backend_->encode(text.substr(start, seg_end - start), ids);
    ids.push_back(hit->id);
    pos += hit->content.size();
    if (hit->rstrip) {
      while (pos < text.size() && is_space(text[pos])) ++pos;
    }
    start = pos;
  }
  if (start < text.size()) backend_->encode(text.substr(start), ids);
  return ids;
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
    if (metaspace_decoder_) {
      // HF's Metaspace decoder: ▁ is a space, except in the first token, where it is dropped.
      for (int32_t id : run) {
        const std::string p = backend_->piece(id);
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
      out += backend_->decode(run);
      decoded += run.size();
    }
    run.clear();
  };
  const int64_t pieces = backend_->size();
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
  if (clean_up_spaces_ && backend_->format() == "wordpiece") out = clean_up_tokenization(std::move(out));
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
          {"pieces", backend_->size()},
          {"num_sentinels", s.num_sentinels},
          {"special_tokens", special},
          {"checksum", checksum_}};
}

void Tokenizer::save(const std::string& dir) const {
  fs::create_directories(dir);
  if (!hf_files_.empty()) {
    for (const auto& [name, bytes] : hf_files_) write_file_atomic(dir + "/" + name, bytes);
    return;
  }
  write_sentencepiece(dir + "/tokenizer.model", dir);
}

void Tokenizer::write_sentencepiece(const std::string& model_path, const std::string& hf_dir) const {
  const fs::path model(model_path);
  const std::string stem = (model.parent_path() / model.stem()).string();
  write_file_atomic(model_path, model_bytes_);
  Json meta = config_json();
  meta["model_file"] = model.filename().string();
  save_json_file(stem + ".lmkit.json", meta);
  const HfFiles hf = HfLoader::export_sentencepiece(*this, model.filename().string());
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
