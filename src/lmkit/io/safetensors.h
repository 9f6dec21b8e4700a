// The safetensors format (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | data
// The header maps each tensor name to {dtype, shape, data_offsets: [begin, end)}
// (offsets relative to the data area) and "__metadata__" to string pairs.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lmkit::io {

/// Tensors by name, in file order of their data.
struct TensorFile {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or an undefined tensor.
  at::Tensor get(const std::string& name) const;
  /// The tensor called `name`; InputError naming `what` (the file) if absent.
  at::Tensor at(const std::string& name, const std::string& what) const;
  std::map<std::string, at::Tensor> as_map() const;
};

/// Reads and validates a safetensors file: the header length lies within the
/// file, the JSON is well-formed, dtypes are known, shape × itemsize equals each
/// byte span, spans lie inside the data area and do not overlap. Every
/// malformed case is an InputError naming the file and what is wrong.
/// Supported dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. The header is read first, then each
/// tensor's bytes straight into its memory (one copy; no mapping, so a file cut short by another
/// process while it is read is an InputError naming the tensor, never a SIGBUS).
TensorFile read_safetensors(const std::string& path);
/// The same validation applied to bytes in memory (`name` is used in messages).
TensorFile parse_safetensors(const std::string& bytes, const std::string& name);

/// Writes tensors (made contiguous, on CPU) atomically, in the official
/// library's order: by descending dtype size, then by name; the header padded
/// with spaces to a multiple of 8.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Whether every value of `t` is finite (not NaN, not ±Inf): one pass, its minimum and maximum
/// (NaN propagates through both). Integer and bool tensors always are.
bool all_finite(const at::Tensor& t);

/// The safetensors spelling of a dtype ("F32", ...); InputError for unsupported ones.
std::string dtype_name(at::ScalarType dtype);

}  // namespace lmkit::io
