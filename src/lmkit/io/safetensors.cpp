#include "lmkit/io/safetensors.h"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"

namespace lmkit::io {
namespace {

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},   {"U8", at::kByte},       {"BOOL", at::kBool},
};

// The largest header we accept: real headers are a few hundred bytes per tensor.
constexpr uint64_t kMaxHeader = 100ull << 20;

}  // namespace

std::string dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes) {
    if (d.type == dtype) return d.name;
  }
  throw InputError(std::string("safetensors: unsupported dtype ") + c10::toString(dtype));
}

at::Tensor TensorFile::get(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.first == name) return t.second;
  }
  return {};
}

at::Tensor TensorFile::at(const std::string& name, const std::string& what) const {
  at::Tensor t = get(name);
  if (!t.defined()) throw InputError(what + ": no tensor named '" + name + "'");
  return t;
}

std::map<std::string, at::Tensor> TensorFile::as_map() const { return {tensors.begin(), tensors.end()}; }

namespace {

// One tensor's header entry, checked against the data area.
struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // in the data area
};

// A shape, with its element count; the product of the nonzero sizes stays far from 2^63,
// since LibTorch computes strides from every size (2^60 elements is 8 EiB at 8 bytes).
template <class Bad>
std::vector<int64_t> parse_shape(const nlohmann::json& shape, const std::string& where, uint64_t& numel, const Bad& bad) {
  if (!shape.is_array()) throw bad(where + ": shape is not an array");
  std::vector<int64_t> out;
  uint64_t extent = 1;
  numel = 1;
  constexpr uint64_t kMaxExtent = uint64_t{1} << 60;
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned()) throw bad(where + ": shape holds " + brief_json(dim));
    const uint64_t d = dim.get<uint64_t>();
    if (d > 0 && extent > kMaxExtent / d) throw bad(where + ": shape " + brief_json(shape) + " is too large");
    extent *= std::max<uint64_t>(d, 1);
    numel *= d;
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}

template <class Bad>
Entry parse_entry(const std::string& key, const nlohmann::json& entry, uint64_t data_size, const Bad& bad) {
  const std::string where = "tensor '" + key + "'";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    throw bad(where + " lacks dtype, shape or data_offsets");
  }
  if (!entry["dtype"].is_string()) throw bad(where + ": dtype is not a string");
  const std::string dtype = entry["dtype"].get<std::string>();
  const DtypeInfo* info = nullptr;
  for (const auto& d : kDtypes) {
    if (dtype == d.name) info = &d;
  }
  if (!info) throw bad(where + " has unknown dtype '" + dtype + "'");
  uint64_t numel = 0;
  Entry e{key, info->type, parse_shape(entry["shape"], where, numel, bad), 0, 0};
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    throw bad(where + ": data_offsets must be two non-negative integers");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end) throw bad(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") is reversed");
  const uint64_t bytes = numel * c10::elementSize(info->type);
  if (bytes != e.end - e.begin) {
    throw bad(where + ": shape × itemsize = " + std::to_string(bytes) + " bytes but data_offsets span " + std::to_string(e.end - e.begin));
  }
  if (e.end > data_size) {
    throw bad(where + ": data_offsets end " + std::to_string(e.end) + " lies past the data area (" +
              std::to_string(data_size) + " bytes; truncated file?)");
  }
  return e;
}

// A file's tensors, before their bytes are read: the header validated against the file's size.
struct Layout {
  TensorFile file;  ///< the metadata; tensors come with their bytes
  std::vector<Entry> entries;
  uint64_t data_start = 0;
};

// The header's length, the little-endian u64 of a file's first 8 bytes (`head` holds them).
uint64_t header_length(std::string_view head) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[i]);
  return n;
}

// The layout of a file of `file_size` bytes whose first bytes are `head` (8 and the header,
// where the file holds them): every check of parse_safetensors but the bytes' own.
Layout parse_layout(std::string_view head, uint64_t file_size, const std::string& name) {
  auto bad = [&](const std::string& what) { return InputError(name + ": not a valid safetensors file: " + what); };
  if (file_size < 8 || head.size() < 8) throw bad("shorter than the 8-byte header length");
  const uint64_t header_len = header_length(head);
  if (header_len > file_size - 8 || header_len > kMaxHeader) {
    throw bad("header length " + std::to_string(header_len) + " exceeds the file size " + std::to_string(file_size));
  }
  if (head.size() < 8 + header_len) throw bad("it ends inside its header (truncated while being read?)");
  nlohmann::json header;
  try {
    header = parse_json(head.substr(8, header_len), "header", /*with_line=*/false);
  } catch (const Error& e) {
    throw bad(std::string("the header is not well-formed JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw bad("the header is not a JSON object");
  Layout layout;
  layout.data_start = 8 + header_len;
  const uint64_t data_size = file_size - layout.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() != "__metadata__") {
      layout.entries.push_back(parse_entry(it.key(), it.value(), data_size, bad));
      continue;
    }
    if (!it.value().is_object()) throw bad("__metadata__ is not an object");
    for (auto m = it.value().begin(); m != it.value().end(); ++m) {
      if (!m.value().is_string()) throw bad("__metadata__ value '" + m.key() + "' is not a string");
      layout.file.metadata[m.key()] = m.value().get<std::string>();
    }
  }
  // In file order; no two tensors may share bytes.
  auto& entries = layout.entries;
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end) throw bad("tensors '" + entries[i - 1].name + "' and '" + entries[i].name + "' overlap");
  }
  return layout;
}

// An open file descriptor, closed on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// `n` bytes at `offset` of `fd` into `out`: how many there were before the file ended.
size_t read_at(const Fd& f, char* out, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(f.fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw RuntimeError(path + ": read failed (" + std::strerror(errno) + ")");
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace

TensorFile parse_safetensors(const std::string& bytes, const std::string& name) {
  Layout layout = parse_layout(bytes, bytes.size(), name);
  for (const Entry& e : layout.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), bytes.data() + layout.data_start + e.begin, e.end - e.begin);
    layout.file.tensors.emplace_back(e.name, t);
  }
  return std::move(layout.file);
}

TensorFile read_safetensors(const std::string& path) {
  check_readable_file(path);
  const Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw InputError(path + ": cannot open file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw InputError(path + ": cannot stat file (" + std::strerror(errno) + ")");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // The length, then the header it gives where the file can hold it (parse_layout says what is wrong otherwise).
  std::string head(8, '\0');
  head.resize(read_at(f, head.data(), 8, 0, path));
  if (head.size() == 8) {
    const uint64_t header_len = header_length(head);
    if (header_len <= std::min<uint64_t>(size - 8, kMaxHeader)) {
      head.resize(8 + header_len);
      head.resize(8 + read_at(f, head.data() + 8, header_len, 8, path));
    }
  }
  Layout layout = parse_layout(head, size, path);
  for (const Entry& e : layout.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    const size_t n = e.end - e.begin;
    if (n > 0 && read_at(f, static_cast<char*>(t.data_ptr()), n, layout.data_start + e.begin, path) < n) {
      throw InputError(path + ": not a valid safetensors file: it ends inside tensor '" + e.name +
                       "' (truncated while being read?)");
    }
    layout.file.tensors.emplace_back(e.name, t);
  }
  return std::move(layout.file);
}

bool all_finite(const at::Tensor& t) {
  if (!t.is_floating_point() || t.numel() == 0) return true;
  const auto [lo, hi] = at::aminmax(t);
  return std::isfinite(lo.item<double>()) && std::isfinite(hi.item<double>());
}


void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, at::Tensor>> sorted;
  for (const auto& t : tensors) sorted.emplace_back(t.first, t.second.detach().to(at::kCPU).contiguous());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    const size_t sa = a.second.element_size(), sb = b.second.element_size();
    return sa != sb ? sa > sb : a.first < b.first;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : sorted) {
    const uint64_t size = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  AtomicFile out(path);
  out.write(len, 8);
  out.write(json);
  for (const auto& t : sorted) out.write(t.second.data_ptr(), static_cast<size_t>(t.second.numel()) * t.second.element_size());
  out.commit();
}

}  // namespace lmkit::io
