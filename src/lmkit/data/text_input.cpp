#include "lmkit/data/text_input.h"

#include <glob.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <streambuf>
#include <iterator>
#include <vector>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/tokenizer/unicode.h"

namespace lmkit::data {

namespace {

constexpr size_t kSniffBytes = 64 * 1024;

bool starts_with(const std::string& s, const char* magic, size_t n) { return s.size() >= n && std::memcmp(s.data(), magic, n) == 0; }

// Refuses bytes that are not text: NULs, or more than 5% invalid UTF-8 (at least 16 sequences).
void check_text_bytes(const std::string& sample, const std::string& path, const std::string& what) {
  if (sample.find('\0') != std::string::npos) {
    throw InputError(path + ": " + what + "holds NUL bytes: not a text file (lmkit reads UTF-8 text, JSONL, and "
                     "gzip- or zstd-compressed JSONL)");
  }
  const size_t bad = tokenizer::unicode::count_invalid_utf8(sample);
  if (bad >= 16 && bad * 20 > sample.size()) {
    throw InputError(path + ": " + what + "is not UTF-8 text (" + std::to_string(bad) + " invalid sequences in its first " +
                     std::to_string(sample.size()) + " bytes; convert it, e.g. iconv -f latin1 -t utf-8)");
  }
}

}  // namespace

namespace detail {

// The decompressing stream buffer: one compressed chunk read, one output buffer filled, at a time.
class DecompressBuf : public std::streambuf {
 public:
  DecompressBuf(const std::string& path, Compression c) : path_(path), kind_(c), in_(path, std::ios::binary) {
    if (!in_) throw InputError(path + ": cannot open file");
    if (kind_ == Compression::kGzip) {
      std::memset(&z_, 0, sizeof(z_));
      if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error(ExitCode::kRuntime, path + ": zlib could not start");
    } else {
      zstd_ = ZSTD_createDStream();
      if (zstd_ == nullptr) throw Error(ExitCode::kRuntime, path + ": libzstd could not start");
      // Any window a frame declares (zstd --long=31, 2 GiB, the largest), not libzstd's default
      // 128 MiB: a shard compressed with a long window is read as the zstd command reads it with
      // --long=31. libzstd allocates what the frame declares (capped by its content size where known).
      if (ZSTD_isError(ZSTD_DCtx_setParameter(zstd_, ZSTD_d_windowLogMax, sizeof(size_t) == 4 ? 30 : 31))) {
        throw Error(ExitCode::kRuntime, path + ": libzstd refused a 2 GiB window limit");
      }
    }
    out_.resize(1 << 18);
    setg(out_.data(), out_.data(), out_.data());
  }
  ~DecompressBuf() override {
    if (kind_ == Compression::kGzip) inflateEnd(&z_);
    if (zstd_) ZSTD_freeDStream(zstd_);
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    count_lines(eback(), egptr());  // every byte handed out so far has been read
    size_t produced = 0;
    while (produced == 0) {
      if (pos_ == avail_ && !pending_) {  // input used up and nothing held back: read more
        if (!refill()) {
          if (!finished_) {
            fail("the " + name() + " stream is truncated (it ends inside a " +
                 (kind_ == Compression::kGzip ? "member" : "frame") + ")");
          }
          return traits_type::eof();
        }
      }
      produced = kind_ == Compression::kGzip ? inflate_some() : zstd_some();
    }
    bool bom = false;
    if (!sniffed_) {
      sniffed_ = true;
      check_text_bytes(std::string(out_.data(), std::min(produced, kSniffBytes)), path_, "its decompressed data ");
      bom = starts_with_byte_order_mark(std::string_view(out_.data(), produced));
    }
    setg(out_.data(), out_.data() + (bom ? 3 : 0), out_.data() + produced);  // a leading byte-order mark is no text
    return gptr() < egptr() ? traits_type::to_int_type(*gptr()) : underflow();
  }

 public:
  int64_t raw_read() const { return raw_read_; }

 private:
  std::string name() const { return kind_ == Compression::kGzip ? "gzip" : "zstd"; }

  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(path_ + ":" + std::to_string(lines_ + 1) + ": " + why);
  }

  void count_lines(const char* from, const char* to) { lines_ += std::count(from, to, '\n'); }

  bool refill() {
    in_.read(raw_.data(), raw_.size());
    avail_ = static_cast<size_t>(in_.gcount()), pos_ = 0;
    raw_read_ += static_cast<int64_t>(avail_);
    if (in_.bad()) fail("read error");
    return avail_ > 0;
  }

  size_t inflate_some() {
    if (finished_) {  // gzip members one after another (as pigz and concatenated shards write them)
      if (inflateReset(&z_) != Z_OK) fail("damaged gzip data");
      finished_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(raw_.data() + pos_);
    z_.avail_in = static_cast<uInt>(avail_ - pos_);
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      fail(std::string("damaged gzip data (zlib: ") + (z_.msg ? z_.msg : "error " + std::to_string(rc)) + ")");
    }
    pos_ = avail_ - z_.avail_in;
    finished_ = rc == Z_STREAM_END;
    pending_ = z_.avail_out == 0;  // the output filled up: zlib may hold more
    return out_.size() - z_.avail_out;
  }

  size_t zstd_some() {
    ZSTD_inBuffer input{raw_.data(), avail_, pos_};
    ZSTD_outBuffer output{out_.data(), out_.size(), 0};
    const size_t rc = ZSTD_decompressStream(zstd_, &output, &input);
    if (ZSTD_isError(rc)) fail(std::string("damaged zstd data (libzstd: ") + ZSTD_getErrorName(rc) + ")");
    pos_ = input.pos;
    finished_ = rc == 0;  // a frame ended: more may follow
    pending_ = output.pos == output.size;  // the output filled up: libzstd may hold more
    return output.pos;
  }

  std::string path_;
  Compression kind_;
  std::ifstream in_;
  std::array<char, 1 << 16> raw_{};
  size_t avail_ = 0, pos_ = 0;
  std::vector<char> out_;
  z_stream z_{};
  ZSTD_DStream* zstd_ = nullptr;
  bool finished_ = false, sniffed_ = false, pending_ = false;
  int64_t lines_ = 0;
  int64_t raw_read_ = 0;  // compressed bytes read from the file
};

}  // namespace detail

Compression sniff_text_file(const std::string& path) {
  check_readable_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::string head(kSniffBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (starts_with(head, "\x1f\x8b", 2)) return Compression::kGzip;
  if (starts_with(head, "\x28\xb5\x2f\xfd", 4)) return Compression::kZstd;
  // Parquet is read by its column (data::read_documents, parquet.h), never as a stream of text.
  check_input(!starts_with(head, "PAR1", 4),
              path + ": a Parquet file, not text (lmkit-tokenize encode and lmkit-pretrain --train read its text column)");
  const char* format = starts_with(head, "BZh", 3)                  ? "bzip2-compressed"
                       : starts_with(head, "\xfd" "7zXZ", 5)        ? "xz-compressed"
                       : starts_with(head, "PK\x03\x04", 4)         ? "a zip archive"
                       : starts_with(head, "7z\xbc\xaf\x27\x1c", 6) ? "a 7z archive"
                                                                    : nullptr;
  if (format) {
    throw InputError(path + ": " + format + ", which lmkit does not read (it reads UTF-8 text, JSONL, gzip- or "
                     "zstd-compressed JSONL: .jsonl.gz, .json.gz, .jsonl.zst, and Parquet)");
  }
  check_text_bytes(head, path, "");
  return Compression::kNone;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::vector<std::string> found;
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      for (const auto& e : fs::directory_iterator(in, ec)) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        // A subdirectory (FineWeb's data/CC-MAIN-*/) would otherwise be a silently shorter corpus.
        check_input(!e.is_directory(ec), e.path().string() + ": a directory inside the input directory; lmkit reads a "
                                         "directory's files, not its subdirectories (give each directory, or a "
                                         "quoted pattern such as '" + in + "/*/*.parquet')");
        if (e.is_regular_file(ec)) found.push_back(e.path().string());
      }
      check_input(!ec, in + ": cannot list the directory (" + ec.message() + ")");
      check_input(!found.empty(), in + ": a directory with no file to read");
    } else if (in.find_first_of("*?[") != std::string::npos && !fs::exists(in, ec)) {
      glob_t g{};
      const int rc = ::glob(in.c_str(), 0, nullptr, &g);
      for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
        if (fs::is_regular_file(g.gl_pathv[i], ec)) found.emplace_back(g.gl_pathv[i]);
      }
      ::globfree(&g);
      check_input(!found.empty(), "'" + in + "': the pattern matches no file");
    } else {
      found.push_back(in);
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string read_text(const std::string& path) {
  std::string text;
  if (sniff_text_file(path) == Compression::kNone) {
    text = read_file(path);
    if (starts_with_byte_order_mark(text)) text.erase(0, 3);  // as TextInput leaves it out
  } else {
    TextInput in(path);  // a damaged stream's InputError comes through the iterator
    text.assign(std::istreambuf_iterator<char>(in.stream()), std::istreambuf_iterator<char>());
  }
  // The sniff saw the first 64 KiB; a NUL byte past them is refused as one in them is.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    check_no_nul(text, path, 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n'));
  }
  return text;
}

void check_no_nul(std::string_view line, const std::string& path, int64_t line_no) {
  check_input(line.find('\0') == std::string_view::npos,
              path + ":" + std::to_string(line_no) + ": a NUL byte: not a text file (lmkit reads UTF-8 text, JSONL, "
                     "gzip- or zstd-compressed JSONL, and Parquet)");
}

std::vector<std::string> read_text_lines(const std::string& path) { return split_lines(read_text(path)); }

std::string strip_compression_suffix(const std::string& path) {
  for (const std::string suffix : {".gz", ".zst"}) {
    if (path.size() > suffix.size() && ends_with(path, suffix)) return path.substr(0, path.size() - suffix.size());
  }
  return path;
}

struct TextInput::Impl {
  Compression compression = Compression::kNone;
  std::unique_ptr<detail::DecompressBuf> buf;
  std::ifstream plain;
  std::unique_ptr<std::istream> stream;
};

TextInput::TextInput(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->compression = sniff_text_file(path);
  if (impl_->compression == Compression::kNone) {
    impl_->plain.open(path, std::ios::binary);
    if (!impl_->plain) throw InputError(path + ": cannot open file");
    // A leading UTF-8 byte-order mark (Windows editors write one) is no text: it reached the corpus
    // as three byte tokens before the first word.
    char head[3] = {};
    impl_->plain.read(head, 3);
    if (impl_->plain.gcount() != 3 || !starts_with_byte_order_mark(std::string_view(head, 3))) {
      impl_->plain.clear();
      impl_->plain.seekg(0);
    }
    return;
  }
  impl_->buf = std::make_unique<detail::DecompressBuf>(path, impl_->compression);
  impl_->stream = std::make_unique<std::istream>(impl_->buf.get());
  impl_->stream->exceptions(std::ios::badbit);  // the buffer's InputError reaches the reader
}

TextInput::~TextInput() = default;

std::istream& TextInput::stream() { return impl_->stream ? *impl_->stream : static_cast<std::istream&>(impl_->plain); }

Compression TextInput::compression() const { return impl_->compression; }

int64_t TextInput::bytes_read() {
  if (impl_->buf) return impl_->buf->raw_read();
  const auto at = impl_->plain.tellg();
  return at < 0 ? 0 : static_cast<int64_t>(at);
}

}  // namespace lmkit::data
