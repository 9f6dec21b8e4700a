// SentencePiece models through lmkit's module (liblmkit_spm.so), and the model
// file format itself (sentencepiece_model.proto, read and written by hand: the
// module cannot hand protobuf objects across, docs/architecture.md).
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <regex>
#include <unordered_map>

#include "../../spm/spm_api.h"
#include "lmkit/core/error.h"
#include "lmkit/core/module.h"
#include "lmkit/core/stop.h"
#include "lmkit/tokenizer/backend.h"

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
    // DEEPBIND: the module resolves its own (bundled protobuf) symbols before LibTorch's.
    // The sanitizers' runtimes cannot work with DEEPBIND (google/sanitizers#611), so a
    // sanitizer build (LMKIT_SANITIZED) goes without: the PyPI wheel's libtorch_cpu
    // exports only onnx_torch's Arena templates and protobuf's byteswap<N>, which
    // sentencepiece does not call or calls with the same meaning.
#ifdef LMKIT_SANITIZED
    const int flags = RTLD_NOW | RTLD_LOCAL;
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
    std::string tried;
    void* lib = detail::open_module("liblmkit_spm.so", "LMKIT_SPM_MODULE", flags, tried);
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

const std::string kWordStart = "\xE2\x96\x81";  // "▁"

class SentencePieceBackend : public Backend {
 public:
  SentencePieceBackend(const std::string& bytes, const std::string& what) {
    char err[1024] = {0};
    void* h = api().load(bytes.data(), static_cast<long>(bytes.size()), err, sizeof err);
    if (!h) throw InputError(what + ": not a SentencePiece model (" + err + ")");
    handle_ = std::shared_ptr<void>(h, [](void* p) { api().free(p); });
    const SpmModel model = parse_spm_model(bytes, what);
    format_ = model.model_type == 2 ? "sentencepiece-bpe" : "sentencepiece-unigram";
    const int n = api().piece_size(h);
    pieces_.reserve(static_cast<size_t>(n));
    for (int id = 0; id < n; ++id) {
      std::string p(64, '\0');
      const int len = api().id_to_piece(h, id, p.data(), static_cast<int>(p.size()));
      if (len > static_cast<int>(p.size())) p.resize(static_cast<size_t>(len)), api().id_to_piece(h, id, p.data(), len);
      p.resize(static_cast<size_t>(std::max(len, 0)));
      ids_.emplace(p, id);
      pieces_.push_back(std::move(p));
      control_.push_back(api().kind(h, id) == LMKIT_SPM_CONTROL);
    }
  }

  std::string format() const override { return format_; }
  int64_t size() const override { return static_cast<int64_t>(pieces_.size()); }
  std::string piece(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)); }
  int32_t id_of(std::string_view piece) const override {
    auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? -1 : it->second;
  }
  bool is_control(int32_t id) const override { return control_.at(static_cast<size_t>(id)); }
  bool starts_word(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)).rfind(kWordStart, 0) == 0; }

  void encode(std::string_view text, std::vector<int32_t>& out) const override {
    const size_t start = out.size();
    out.resize(start + text.size() + 8);
    long n = api().encode(handle_.get(), text.data(), static_cast<long>(text.size()), out.data() + start,
                          static_cast<long>(out.size() - start));
    if (n > static_cast<long>(out.size() - start)) {
      out.resize(start + static_cast<size_t>(n));
      n = api().encode(handle_.get(), text.data(), static_cast<long>(text.size()), out.data() + start, n);
    }
    if (n < 0) throw RuntimeError("SentencePiece failed to encode a text");
    out.resize(start + static_cast<size_t>(n));
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text(ids.size() * 8 + 16, '\0');
    long n = api().decode(handle_.get(), ids.data(), static_cast<long>(ids.size()), text.data(), static_cast<long>(text.size()));
    if (n > static_cast<long>(text.size())) {
      text.resize(static_cast<size_t>(n));
      n = api().decode(handle_.get(), ids.data(), static_cast<long>(ids.size()), text.data(), n);
    }
    if (n < 0) throw RuntimeError("SentencePiece failed to decode ids");
    text.resize(static_cast<size_t>(n));
    return text;
  }

 private:
  std::shared_ptr<void> handle_;
  std::string format_;
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> control_;
};

// ---- protobuf wire format ---------------------------------------------------

struct Reader {
  std::string_view data;
  size_t pos = 0;
  const std::string& what;
  bool done() const { return pos >= data.size(); }
  [[noreturn]] void fail() const { throw InputError(what + ": not a SentencePiece model (malformed protobuf)"); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= data.size()) fail();
      const auto b = static_cast<unsigned char>(data[pos++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail();
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > data.size() - pos) fail();
    auto s = data.substr(pos, static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return s;
  }
  uint32_t fixed32() {
    if (data.size() - pos < 4) fail();
    uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return v;
  }
  void skip(int wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: if (data.size() - pos < 8) fail(); pos += 8; break;
      case 2: bytes(); break;
      case 5: fixed32(); break;
      default: fail();
    }
  }
};

struct Writer {
  std::string out;
  void varint(uint64_t v) {
    while (v >= 0x80) out.push_back(static_cast<char>((v & 0x7F) | 0x80)), v >>= 7;
    out.push_back(static_cast<char>(v));
  }
  void tag(int field, int wire) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  void bytes(int field, std::string_view s) { tag(field, 2), varint(s.size()), out.append(s); }
  void number(int field, uint64_t v) { tag(field, 0), varint(v); }
  void real(int field, float f) {
    tag(field, 5);
    char b[4];
    std::memcpy(b, &f, 4);
    out.append(b, 4);
  }
};

}  // namespace

SpmModel parse_spm_model(std::string_view bytes, const std::string& what) {
  SpmModel m;
  Reader r{bytes, 0, what};
  while (!r.done()) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (wire == 2 && (field == 1 || field == 2 || field == 3)) {
      Reader sub{r.bytes(), 0, what};
      if (field == 1) {  // SentencePiece { piece = 1; score = 2; type = 3; }
        SpmModel::Piece p;
        while (!sub.done()) {
          const uint64_t k = sub.varint();
          if (k == (1 << 3 | 2)) p.piece = std::string(sub.bytes());
          else if (k == (2 << 3 | 5)) { const uint32_t v = sub.fixed32(); std::memcpy(&p.score, &v, 4); }
          else if (k == (3 << 3 | 0)) p.type = static_cast<int>(sub.varint());
          else sub.skip(static_cast<int>(k & 7));
        }
        m.pieces.push_back(std::move(p));
      } else if (field == 2) {  // TrainerSpec { model_type = 3; byte_fallback = 35; treat_whitespace_as_suffix = 24; }
        while (!sub.done()) {
          const uint64_t k = sub.varint();
          if (k == (3 << 3 | 0)) m.model_type = static_cast<int>(sub.varint());
          else if (k == (35 << 3 | 0)) m.byte_fallback = sub.varint() != 0;
          else if (k == (24 << 3 | 0)) m.treat_whitespace_as_suffix = sub.varint() != 0;
          else sub.skip(static_cast<int>(k & 7));
        }
      } else {  // NormalizerSpec { name = 1; precompiled_charsmap = 2; add_dummy_prefix = 3; remove_extra_whitespaces = 4; escape_whitespaces = 5; }
        while (!sub.done()) {
          const uint64_t k = sub.varint();
          if (k == (1 << 3 | 2)) m.normalizer_name = std::string(sub.bytes());
          else if (k == (2 << 3 | 2)) m.precompiled_charsmap = std::string(sub.bytes());
          else if (k == (3 << 3 | 0)) m.add_dummy_prefix = sub.varint() != 0;
          else if (k == (4 << 3 | 0)) m.remove_extra_whitespaces = sub.varint() != 0;
          else if (k == (5 << 3 | 0)) m.escape_whitespaces = sub.varint() != 0;
          else sub.skip(static_cast<int>(k & 7));
        }
      }
    } else {
      r.skip(wire);
    }
  }
  if (m.pieces.empty()) throw InputError(what + ": not a SentencePiece model (no pieces)");
  return m;
}

std::string serialize_spm_model(const SpmModel& m) {
  Writer w;
  for (const auto& p : m.pieces) {
    Writer piece;
    piece.bytes(1, p.piece);
    piece.real(2, p.score);
    if (p.type != SpmModel::kNormal) piece.number(3, static_cast<uint64_t>(p.type));
    w.bytes(1, piece.out);
  }
  Writer trainer;
  trainer.number(3, static_cast<uint64_t>(m.model_type));
  trainer.number(4, m.pieces.size());
  if (m.treat_whitespace_as_suffix) trainer.number(24, 1);
  trainer.number(35, m.byte_fallback ? 1 : 0);
  w.bytes(2, trainer.out);
  Writer normalizer;
  normalizer.bytes(1, m.normalizer_name);
  if (!m.precompiled_charsmap.empty()) normalizer.bytes(2, m.precompiled_charsmap);
  normalizer.number(3, m.add_dummy_prefix), normalizer.number(4, m.remove_extra_whitespaces);
  normalizer.number(5, m.escape_whitespaces);
  w.bytes(3, normalizer.out);
  return w.out;
}

std::shared_ptr<const Backend> load_sentencepiece(const std::string& bytes, const std::string& what) {
  return std::make_shared<SentencePieceBackend>(bytes, what);
}

namespace {

// SentencePiece's trainer does not say why a write failed: a full disk or a file-size limit gave
// "tokenizer training failed: " (its status is the failed check, "[output->WriteLine(...)] ", with
// no text), or success and an empty model (a buffered write it never checked on close).
[[noreturn]] void throw_unwritten(const std::string& model_path) {
  const fs::path path(model_path);
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::error_code ec;
  const auto space = fs::space(dir, ec);
  throw RuntimeError(model_path + ": the trained tokenizer could not be written (" +
                     (ec ? ec.message() : std::to_string(space.available) + " bytes free in " + dir.string()) +
                     "; a full disk or a file-size limit?)");
}

bool written(const std::vector<std::pair<std::string, std::string>>& options) {
  for (const auto& [k, prefix] : options) {
    if (k != "model_prefix") continue;
    for (const char* ext : {".model", ".vocab"}) {
      std::error_code ec;
      const auto size = fs::file_size(prefix + ext, ec);
      if (ec || size == 0) return false;
    }
  }
  return true;
}

// The trainer's status through the pipe: its return code, then its message.
void report(int fd, int rc, const char* err) {
  std::string out(reinterpret_cast<const char*>(&rc), sizeof rc);
  out += err;
  for (size_t at = 0; at < out.size();) {
    const ssize_t n = ::write(fd, out.data() + at, out.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
}

// Reads the child's report until it closes the pipe; false when a stop signal came first.
bool read_report(int fd, std::string& got) {
  char buf[1024];
  for (;;) {
    if (stop_pending()) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);  // a stop signal is seen within 0.1 s
    if (ready < 0 && errno != EINTR) throw RuntimeError(std::string("tokenizer training: poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    got.append(buf, static_cast<size_t>(n));
  }
}

// SentencePiece's trainer has no way to stop it: on a large text it runs for minutes (84 s on
// 54 MB here), past a scheduler's grace between SIGTERM and SIGKILL. It runs in a child
// process, which a stop signal ends at once (the caller's Interrupted), and which dies with
// this process. Its return code, with its message in err.
int train_in_child(const std::vector<const char*>& keys, const std::vector<const char*>& values, char* err, size_t err_len) {
  const Api& a = api();  // loaded here: a module that does not load is this process's error
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot start threads (the trainer's) in a child forked from a threaded
  // process: scripts/sanitize.sh's tsan build trains in the process, without the stop.
  return a.train(keys.data(), values.data(), static_cast<int>(keys.size()), err, static_cast<int>(err_len));
#endif
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw RuntimeError(std::string("tokenizer training: pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    throw RuntimeError(std::string("tokenizer training: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    try {  // nothing may unwind into the caller's copy of the stack
      const int rc = a.train(keys.data(), values.data(), static_cast<int>(keys.size()), err, static_cast<int>(err_len));
      report(fds[1], rc, err);
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  bool finished = false;
  std::exception_ptr failed;  // the parent's own failure (poll), said once the child is reaped
  try {
    finished = read_report(fds[0], got);
  } catch (...) {
    failed = std::current_exception();
  }
  ::close(fds[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failed) std::rethrow_exception(failed);
  if (!finished) check_stop("tokenizer training");
  if (got.size() < sizeof(int)) {
    const std::string how = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status)) +
                                                      (WTERMSIG(status) == SIGKILL ? " (out of memory?)" : "")
                                                : "ended with exit status " + std::to_string(WEXITSTATUS(status));
    throw RuntimeError("tokenizer training: SentencePiece's trainer (a child process) " + how + " before it finished");
  }
  int rc = 0;
  std::memcpy(&rc, got.data(), sizeof rc);
  std::snprintf(err, err_len, "%s", got.c_str() + sizeof rc);
  return rc;
}

}  // namespace

void train_sentencepiece(const std::vector<std::pair<std::string, std::string>>& options, const std::string& model_path) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : options) keys.push_back(k.c_str()), values.push_back(v.c_str());
  char err[1024] = {0};
  if (train_in_child(keys, values, err, sizeof err) == 0) {
    if (!written(options)) throw_unwritten(model_path);
    return;
  }
  // SentencePiece's status text ("Internal: trainer_interface.cc(580) [...] 200 vs 339"), in the user's terms.
  std::string message(err);
  if (message.find("->Write") != std::string::npos) throw_unwritten(model_path);
  std::smatch m;
  if (std::regex_search(message, m, std::regex("smaller than required_chars\\. ([0-9]+) vs ([0-9]+)"))) {
    // With byte fallback the required pieces are the text's characters and the 256 byte pieces.
    const bool bytes = std::any_of(options.begin(), options.end(), [](const auto& o) { return o.first == "byte_fallback" && o.second == "true"; });
    const std::string what = bytes ? "each character of the training text, and the 256 byte-fallback pieces"
                                   : "each distinct character of the training text";
    throw InputError("the tokenizer needs " + m[2].str() + " pieces to start from (" + what + "), more than the " + m[1].str() +
                     " --vocab-size leaves for them: raise --vocab-size or lower --character-coverage");
  }
  if (std::regex_search(message, m, std::regex("Vocabulary size too high \\(([0-9]+)\\)\\. Please set it to a value <= ([0-9]+)"))) {
    throw InputError("the training text can give at most " + m[2].str() + " pieces, fewer than the " + m[1].str() +
                     " --vocab-size asks for: lower --vocab-size or give more text");
  }
  // Its sentences are the input's lines, less the empty ones and those past max_sentence_length.
  if (message.find("[!sentences_.empty()]") != std::string::npos) {
    throw InputError("tokenizer training: no sentence to learn from (every line of the input is empty, or longer "
                     "than SentencePiece's 65,536 bytes)");
  }
  // "Internal: FILE(LINE) [CHECK] TEXT": the text, or the failed check where there is none.
  const size_t open = message.find(" ["), tag = message.find("] ");
  if (message.rfind("Internal:", 0) == 0 && tag != std::string::npos) {
    const std::string text = message.substr(tag + 2);
    message = text.find_first_not_of(" \n") != std::string::npos || open == std::string::npos || open > tag
                  ? text
                  : "SentencePiece's check " + message.substr(open + 1, tag - open) + " failed";
  }
  throw InputError("tokenizer training failed: " + message);
}

}  // namespace lmkit::tokenizer
