// Fuzzes the safetensors reader (parse_safetensors: the header, shapes, offsets, data).
#include <ATen/ATen.h>

#include "fuzz_util.h"
#include "lmkit/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmkit::fuzz::expect_input_errors([&] {
    const auto file = lmkit::io::parse_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& [name, t] : file.tensors) {
      // Touch every loaded byte: a wrong span would read outside the tensor.
      if (t.numel() > 0) (void)t.to(at::kDouble).sum().item<double>();
    }
  });
  return 0;
}
