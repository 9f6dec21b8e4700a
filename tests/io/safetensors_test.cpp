#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/io/safetensors.h"
#include "test_util.h"

using lmkit::io::parse_safetensors;

namespace {

// A file from a header JSON string and `data_size` zero bytes of data.
std::string craft(const std::string& header, size_t data_size, uint64_t declared_len = 0) {
  const uint64_t n = declared_len ? declared_len : header.size();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + std::string(data_size, '\0');
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "w.safetensors");
  } catch (const lmkit::Error& e) {
    CHECK(e.code() == lmkit::ExitCode::kInput);
    return e.what();
  }
  FAIL("accepted a malformed file");
  return "";
}

}  // namespace

TEST_CASE("safetensors: write -> read round trip for every dtype bit for bit", "[io][safetensors]") {
  lmkit::test::TempDir dir;
  std::vector<std::pair<std::string, at::Tensor>> tensors{
      {"f32", at::randn({3, 4})},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"bf16", at::randn({2, 2}).to(at::kBFloat16)},
      {"i64", at::arange(7, at::kLong)},
      {"i32", at::arange(6, at::kInt).view({2, 3})},
      {"flag", at::tensor({1, 0, 1}).to(at::kBool)},
      {"scalar", at::tensor(3.5f)},               // 0-dim: shape []
      {"empty", at::empty({0, 4})},                // zero bytes
      {"strided", at::randn({4, 6}).t()},         // non-contiguous input
  };
  lmkit::io::write_safetensors(dir / "t.safetensors", tensors, {{"format", "pt"}});
  auto file = lmkit::io::read_safetensors(dir / "t.safetensors");
  CHECK(file.metadata.at("format") == "pt");
  REQUIRE(file.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    at::Tensor got = file.get(name);
    REQUIRE(got.defined());
    CHECK(got.scalar_type() == t.scalar_type());
    CHECK(got.sizes() == t.sizes());
    CHECK(at::equal(got, t));
  }
  // The official order: descending dtype size, then name; header padded to 8 bytes.
  const std::string bytes = lmkit::read_file(dir / "t.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);
  const std::string header = bytes.substr(8, n);
  CHECK(header.find("\"i64\"") < header.find("\"f32\""));
  CHECK(header.find("\"f32\"") < header.find("\"i32\""));
  CHECK(header.find("\"bf16\"") < header.find("\"f16\""));
}

TEST_CASE("safetensors: every malformed file gives its own error", "[io][safetensors]") {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK_NOTHROW(parse_safetensors(craft(ok, 8), "ok"));
  CHECK_THAT(error_of("abc"), Catch::Contains("shorter than the 8-byte header length"));
  CHECK_THAT(error_of(craft(ok, 8, 1000)), Catch::Contains("header length 1000 exceeds the file size"));
  CHECK_THAT(error_of(craft(ok, 8, 0xFFFFFFFFFFFFFFF0ull)), Catch::Contains("exceeds the file size"));
  CHECK_THAT(error_of(craft("{\"a\": [1, ", 8)), Catch::Contains("not well-formed JSON"));
  CHECK_THAT(error_of(craft("[1,2]", 8)), Catch::Contains("not a JSON object"));
  // A tensor named twice: the second copy used to win silently.
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
             Catch::Contains("key 'a' appears twice"));
  // A header of 100,000 nested arrays: one error, no stack overflow.
  CHECK_THAT(error_of(craft(std::string(100000, '[') + std::string(100000, ']'), 8)),
             Catch::Contains("nested deeper than 512 levels"));
  CHECK_THAT(error_of(craft(ok, 4)), Catch::Contains("past the data area") && Catch::Contains("truncated"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("shape × itemsize = 12 bytes but data_offsets span 8"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("unknown dtype 'F99'"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            12)),
             Catch::Contains("overlap"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)), Catch::Contains("reversed"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)), Catch::Contains("shape holds"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[2]}})", 8)), Catch::Contains("lacks dtype, shape or data_offsets"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)),
             Catch::Contains("too large"));
  CHECK_THAT(error_of(craft(R"({"__metadata__":{"k":1}})", 0)), Catch::Contains("not a string"));
  // Byte sizes that wrap past 2^64 (2^62 × 8 bytes spans 0) and zero-size tensors whose
  // other sizes overflow LibTorch's stride arithmetic: named, not "Storage size calculation overflowed".
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0)),
             Catch::Contains("is too large"));
  CHECK_THAT(error_of(craft(R"({"a":{"dtype":"I64","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", 0)),
             Catch::Contains("is too large"));
  CHECK(parse_safetensors(craft(R"({"a":{"dtype":"F32","shape":[0,1000000],"data_offsets":[0,0]}})", 0), "empty")
            .get("a").numel() == 0);
}

TEST_CASE("safetensors: a truncated file on disk is refused naming the file", "[io][safetensors]") {
  lmkit::test::TempDir dir;
  lmkit::io::write_safetensors(dir / "w.safetensors", {{"w", at::randn({64, 64})}});
  std::string bytes = lmkit::read_file(dir / "w.safetensors");
  lmkit::write_file_atomic(dir / "cut.safetensors", bytes.substr(0, bytes.size() - 100));
  CHECK_THROWS_WITH(lmkit::io::read_safetensors(dir / "cut.safetensors"),
                    Catch::Contains("cut.safetensors") && Catch::Contains("truncated"));
  CHECK_THROWS_WITH(lmkit::io::read_safetensors(dir / "none.safetensors"), Catch::Contains("cannot open"));
}

TEST_CASE("safetensors: a tensor read from a file is its own: a write changes the tensor, never the file",
          "[io][safetensors]") {
  lmkit::test::TempDir dir;
  const at::Tensor w = at::randn({64, 64});
  lmkit::io::write_safetensors(dir / "w.safetensors", {{"w", w}, {"b", at::arange(5, at::kByte)}});
  const std::string before = lmkit::read_file(dir / "w.safetensors");
  at::Tensor loaded;
  {
    auto file = lmkit::io::read_safetensors(dir / "w.safetensors");
    loaded = file.get("w");  // outlives the TensorFile
  }
  CHECK(at::equal(loaded, w));
  loaded.mul_(2).add_(1);
  CHECK(at::allclose(loaded, w * 2 + 1));
  CHECK(lmkit::read_file(dir / "w.safetensors") == before);
  CHECK(at::equal(lmkit::io::read_safetensors(dir / "w.safetensors").get("w"), w));
  // Bytes not aligned for their type (an F32 tensor after 3 bytes of U8, as another writer
  // may order them) read as the same values.
  const at::Tensor f = at::arange(6, at::kFloat);
  std::string data(3, '\x07');
  data.append(reinterpret_cast<const char*>(f.data_ptr<float>()), 24);
  const std::string header = R"({"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"f":{"dtype":"F32","shape":[2,3],"data_offsets":[3,27]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  lmkit::write_file_atomic(dir / "odd.safetensors", bytes + header + data);
  const auto odd = lmkit::io::read_safetensors(dir / "odd.safetensors");
  CHECK(at::equal(odd.get("f"), f.view({2, 3})));
  CHECK(at::equal(odd.get("u"), at::full({3}, 7, at::kByte)));
}

TEST_CASE("safetensors: all_finite sees NaN and Inf anywhere, in every float type", "[io][safetensors]") {
  for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    INFO(c10::toString(dtype));
    at::Tensor t = at::randn({1000}).to(dtype);
    CHECK(lmkit::io::all_finite(t));
    for (const double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}}) {
      for (const int64_t at_index : {int64_t{0}, int64_t{517}, int64_t{999}}) {
        at::Tensor u = t.clone();
        u[at_index] = bad;
        CHECK_FALSE(lmkit::io::all_finite(u));
      }
    }
  }
  CHECK(lmkit::io::all_finite(at::empty({0, 4})));
  CHECK(lmkit::io::all_finite(at::arange(10)));  // integers always are
}
