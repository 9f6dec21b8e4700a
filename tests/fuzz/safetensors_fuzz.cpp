// Fuzzes the safetensors reader: parse_safetensors on the bytes in memory (the header, shapes,
// offsets, data), and read_safetensors on the same bytes as a file (the header read first, then
// each tensor's bytes with pread), which must agree: both refuse, or both give the same tensors.
#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "fuzz_util.h"
#include "lmkit/io/safetensors.h"

namespace {

std::optional<lmkit::io::TensorFile> attempt(const std::function<lmkit::io::TensorFile()>& read) {
  std::optional<lmkit::io::TensorFile> file;
  lmkit::fuzz::expect_input_errors([&] { file = read(); });
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto from_bytes = attempt([&] { return lmkit::io::parse_safetensors(bytes, "fuzz"); });
  const auto path = lmkit::fuzz::scratch() / "fuzz.safetensors";
  lmkit::fuzz::write_file(path, bytes);
  const auto from_file = attempt([&] { return lmkit::io::read_safetensors(path.string()); });
  if (from_bytes.has_value() != from_file.has_value()) std::abort();  // one reader took what the other refused
  if (!from_bytes) return 0;
  if (from_bytes->tensors.size() != from_file->tensors.size() || from_bytes->metadata != from_file->metadata) std::abort();
  for (size_t i = 0; i < from_bytes->tensors.size(); ++i) {
    const auto& [name, t] = from_bytes->tensors[i];
    const auto& [file_name, u] = from_file->tensors[i];
    // Touch every loaded byte: a wrong span would read outside the tensor.
    if (t.numel() > 0) (void)t.to(at::kDouble).sum().item<double>();
    if (name != file_name || t.scalar_type() != u.scalar_type() || t.sizes() != u.sizes()) std::abort();
    const int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
    if (n > 0 && std::memcmp(t.data_ptr(), u.data_ptr(), static_cast<size_t>(n)) != 0) std::abort();
  }
  return 0;
}
