#include "lmkit/tokenizer/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "../../spm/spm_api.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {
namespace {

// The module's functions, resolved once.
struct Api {
  decltype(&lmkit_spm_train) train;
  decltype(&lmkit_spm_load) load;
  decltype(&lmkit_spm_free) free;
  decltype(&lmkit_spm_piece_size) piece_size;
  decltype(&lmkit_spm_piece_to_id) piece_to_id;
  decltype(&lmkit_spm_id_to_piece) id_to_piece;
  decltype(&lmkit_spm_kind) kind;
  decltype(&lmkit_spm_encode) encode;
  decltype(&lmkit_spm_decode) decode;
};

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("LMKIT_SPM_MODULE")) candidates.push_back(env);
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.push_back((exe.parent_path() / "liblmkit_spm.so").string());
      candidates.push_back((exe.parent_path() / ".." / "lib" / "liblmkit_spm.so").string());
      candidates.push_back((exe.parent_path() / ".." / "lib" / "lmkit" / "liblmkit_spm.so").string());
    }
    void* lib = nullptr;
    std::string tried;
    for (const auto& path : candidates) {
      tried += (tried.empty() ? "" : ", ") + path;
      if (!fs::exists(path)) continue;
      // DEEPBIND: the module resolves its own (bundled protobuf) symbols before LibTorch's.
      lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib) break;
      tried += std::string(" (") + ::dlerror() + ")";
    }
    if (!lib) throw RuntimeError("cannot load the SentencePiece module liblmkit_spm.so (tried " + tried + ")");
    auto sym = [&](const char* name) {
      void* f = ::dlsym(lib, name);
      if (!f) throw RuntimeError(std::string("SentencePiece module lacks ") + name);
      return f;
    };
    a.train = reinterpret_cast<decltype(a.train)>(sym("lmkit_spm_train"));
    a.load = reinterpret_cast<decltype(a.load)>(sym("lmkit_spm_load"));
    a.free = reinterpret_cast<decltype(a.free)>(sym("lmkit_spm_free"));
    a.piece_size = reinterpret_cast<decltype(a.piece_size)>(sym("lmkit_spm_piece_size"));
    a.piece_to_id = reinterpret_cast<decltype(a.piece_to_id)>(sym("lmkit_spm_piece_to_id"));
    a.id_to_piece = reinterpret_cast<decltype(a.id_to_piece)>(sym("lmkit_spm_id_to_piece"));
    a.kind = reinterpret_cast<decltype(a.kind)>(sym("lmkit_spm_kind"));
    a.encode = reinterpret_cast<decltype(a.encode)>(sym("lmkit_spm_encode"));
    a.decode = reinterpret_cast<decltype(a.decode)>(sym("lmkit_spm_decode"));
  });
  return a;
}

constexpr int kT5Sentinels = 100;
const std::string kWordStart = "\xE2\x96\x81";  // "▁"

// A piece's text, whatever its length (the module reports the full size when `cap` is short).
std::string piece_of(void* handle, int id) {
  std::string piece(64, '\0');
  const int n = api().id_to_piece(handle, id, piece.data(), static_cast<int>(piece.size()));
  if (n > static_cast<int>(piece.size())) {
    piece.resize(static_cast<size_t>(n));
    api().id_to_piece(handle, id, piece.data(), n);
  }
  piece.resize(static_cast<size_t>(std::max(n, 0)));
  return piece;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

Family parse_family(const std::string& name) {
  if (name == "bert") return Family::kBert;
  if (name == "gpt2" || name == "gpt") return Family::kGpt2;
  if (name == "t5") return Family::kT5;
  throw InputError("unknown tokenizer family '" + name + "' (expected bert, gpt2 or t5)");
}

std::string family_name(Family family) {
  switch (family) {
    case Family::kBert: return "bert";
    case Family::kGpt2: return "gpt2";
    case Family::kT5: return "t5";
  }
  return "";
}

Tokenizer Tokenizer::train(const TrainOptions& o) {
  check_input(!o.inputs.empty(), "tokenizer training: no input files");
  int64_t total_bytes = 0;
  for (const auto& in : o.inputs) {
    check_input(fs::is_regular_file(in), in + ": no such file");
    total_bytes += static_cast<int64_t>(fs::file_size(in));
  }
  check_input(total_bytes > 0, "tokenizer training: the input files are empty");
  check_input(o.output.size() > 6 && o.output.substr(o.output.size() - 6) == ".model",
              "--output must name a .model file, got '" + o.output + "'");
  check_input(o.model_type == "unigram" || o.model_type == "bpe", "--model-type must be unigram or bpe");
  const int64_t reserved = o.family == Family::kT5 ? kT5Sentinels : 0;
  check_input(o.vocab_size > reserved + 16, "--vocab-size " + std::to_string(o.vocab_size) + " is too small");

  std::string inputs;
  for (const auto& in : o.inputs) inputs += (inputs.empty() ? "" : ",") + in;
  const std::string prefix = o.output.substr(0, o.output.size() - 6) + ".tmp" + std::to_string(::getpid());
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  switch (o.family) {
    case Family::kBert:
      kw.insert(kw.end(), {{"pad_id", "0"}, {"pad_piece", "[PAD]"}, {"unk_id", "1"}, {"unk_piece", "[UNK]"},
                           {"eos_id", "-1"}, {"control_symbols", "[CLS],[SEP],[MASK]"}});
      break;
    case Family::kGpt2:
      kw.insert(kw.end(), {{"unk_id", "0"}, {"eos_id", "1"}, {"eos_piece", "<|endoftext|>"}, {"pad_id", "-1"}});
      break;
    case Family::kT5:
      kw.insert(kw.end(), {{"pad_id", "0"}, {"eos_id", "1"}, {"unk_id", "2"}});
      break;
  }
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : kw) keys.push_back(k.c_str()), values.push_back(v.c_str());
  char err[1024] = {0};
  if (api().train(keys.data(), values.data(), static_cast<int>(kw.size()), err, sizeof err) != 0) {
    std::error_code ec;
    fs::remove(prefix + ".model", ec), fs::remove(prefix + ".vocab", ec);
    throw InputError("tokenizer training failed: " + std::string(err));
  }
  std::error_code ec;
  fs::remove(prefix + ".vocab", ec);
  const std::string bytes = read_file(prefix + ".model");
  fs::remove(prefix + ".model", ec);
  write_file_atomic(o.output, bytes);
  Tokenizer t = load(o.output, o.family);
  save_json_file((fs::path(o.output).parent_path() / "tokenizer_config.json").string(), t.config_json());
  return t;
}

Tokenizer Tokenizer::load(const std::string& model_path, std::optional<Family> family) {
  if (!fs::is_regular_file(model_path)) throw InputError(model_path + ": no such tokenizer model");
  Tokenizer t;
  t.model_bytes_ = read_file(model_path);
  t.checksum_ = fnv1a64(t.model_bytes_);
  char err[1024] = {0};
  void* h = api().load(model_path.c_str(), err, sizeof err);
  if (!h) throw InputError(model_path + ": not a SentencePiece model (" + err + ")");
  t.handle_ = std::shared_ptr<void>(h, [](void* p) { api().free(p); });
  t.piece_size_ = api().piece_size(h);

  auto raw_piece = [&](int id) { return piece_of(h, id); };
  // The id of a piece, or -1 when the model lacks it (PieceToId answers the unknown id then).
  auto id_of = [&](const char* piece) {
    const int id = api().piece_to_id(h, piece);
    return raw_piece(id) == piece ? id : -1;
  };
  if (!family) {
    const fs::path config = fs::path(model_path).parent_path() / "tokenizer_config.json";
    if (fs::exists(config)) {
      Json j = load_json_file(config.string());
      if (j.contains("family") && j["family"].is_string()) family = parse_family(j["family"].get<std::string>());
    }
  }
  if (!family) {
    family = id_of("[CLS]") >= 0 ? Family::kBert : id_of("<|endoftext|>") >= 0 ? Family::kGpt2 : Family::kT5;
  }
  t.family_ = *family;
  SpecialTokens& s = t.specials_;
  switch (t.family_) {
    case Family::kBert:
      s.pad = id_of("[PAD]"), s.unk = id_of("[UNK]"), s.cls = id_of("[CLS]"), s.sep = id_of("[SEP]"), s.mask = id_of("[MASK]");
      if (s.pad < 0 || s.cls < 0 || s.sep < 0 || s.mask < 0) {
        throw InputError(model_path + ": not a BERT tokenizer (needs [PAD] [CLS] [SEP] [MASK])");
      }
      break;
    case Family::kGpt2:
      s.eos = id_of("<|endoftext|>"), s.unk = id_of("<unk>");
      if (s.eos < 0) throw InputError(model_path + ": not a GPT-2 tokenizer (needs <|endoftext|>)");
      break;
    case Family::kT5:
      s.pad = id_of("<pad>"), s.eos = id_of("</s>"), s.unk = id_of("<unk>"), s.num_sentinels = kT5Sentinels;
      if (s.pad < 0 || s.eos < 0) throw InputError(model_path + ": not a T5 tokenizer (needs <pad> and </s>)");
      break;
  }
  t.vocab_size_ = t.piece_size_ + s.num_sentinels;
  t.kind_.assign(static_cast<size_t>(t.vocab_size_), 1);
  t.word_start_.assign(static_cast<size_t>(t.vocab_size_), 1);
  for (int32_t id = 0; id < t.piece_size_; ++id) {
    const int kind = api().kind(h, id);
    // Unknown, byte and regular pieces are text; control pieces (and padding) are special.
    t.kind_[static_cast<size_t>(id)] = kind == LMKIT_SPM_CONTROL || id == s.pad ? 1 : 0;
    const std::string p = raw_piece(id);
    t.word_start_[static_cast<size_t>(id)] = t.kind_[static_cast<size_t>(id)] || p.rfind(kWordStart, 0) == 0;
    if (!t.kind_[static_cast<size_t>(id)]) t.regular_.push_back(id);
  }
  return t;
}

std::string Tokenizer::piece(int32_t id) const {
  if (id >= piece_size_ && id < vocab_size_) return "<extra_id_" + std::to_string(vocab_size_ - 1 - id) + ">";
  if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
  return piece_of(handle_.get(), id);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size() + 8);
  long n = api().encode(handle_.get(), text.data(), static_cast<long>(text.size()), ids.data(), static_cast<long>(ids.size()));
  if (n > static_cast<long>(ids.size())) {
    ids.resize(static_cast<size_t>(n));
    n = api().encode(handle_.get(), text.data(), static_cast<long>(text.size()), ids.data(), n);
  }
  if (n < 0) throw RuntimeError("SentencePiece failed to encode a text");
  ids.resize(static_cast<size_t>(n));
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool keep_special) const {
  std::string out;
  std::vector<int32_t> run;  // consecutive ordinary pieces, decoded together
  auto flush = [&] {
    if (run.empty()) return;
    std::string text(run.size() * 8 + 16, '\0');
    long n = api().decode(handle_.get(), run.data(), static_cast<long>(run.size()), text.data(), static_cast<long>(text.size()));
    if (n > static_cast<long>(text.size())) {
      text.resize(static_cast<size_t>(n));
      n = api().decode(handle_.get(), run.data(), static_cast<long>(run.size()), text.data(), n);
    }
    if (n < 0) throw RuntimeError("SentencePiece failed to decode ids");
    out += text.substr(0, static_cast<size_t>(n));
    run.clear();
  };
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) throw InputError("token id " + std::to_string(id) + " is outside the vocabulary");
    if (id >= piece_size_) {
      flush();
      out += piece(id);  // sentinel
    } else if (is_special(id)) {
      flush();
      if (keep_special) out += piece(id);
    } else {
      run.push_back(id);
    }
  }
  flush();
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
  return {{"family", family_name(family_)},
          {"vocab_size", vocab_size_},
          {"sentencepiece_pieces", piece_size_},
          {"num_sentinels", s.num_sentinels},
          {"special_tokens", special},
          {"checksum", checksum_}};
}

void Tokenizer::save(const std::string& dir) const {
  write_file_atomic(dir + "/tokenizer.model", model_bytes_);
  save_json_file(dir + "/tokenizer_config.json", config_json());
}

}  // namespace lmkit::tokenizer
