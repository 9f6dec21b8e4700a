// TensorBoard event files: CRC32C, TFRecord framing and the Event protos against
// known vectors (RFC 3720's CRC32C check value; bytes from tensorboard 2.21's own
// protos and masked_crc32c). Reading whole files back: tests/interop/tensorboard_check.py.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include "lmkit/core/file.h"
#include "lmkit/core/tensorboard.h"
#include "test_util.h"

using namespace lmkit;

namespace {
std::string hex(const std::string& bytes) {
  std::string out;
  char b[3];
  for (const char c : bytes) std::snprintf(b, sizeof(b), "%02x", static_cast<unsigned>(static_cast<uint8_t>(c))), out += b;
  return out;
}
}  // namespace

TEST_CASE("tensorboard: CRC32C and TFRecord framing match known vectors", "[tensorboard]") {
  CHECK(tensorboard::crc32c("123456789") == 0xe3069283u);
  CHECK(tensorboard::crc32c("") == 0u);
  CHECK(tensorboard::crc32c(std::string(32, '\0')) == 0x8a9136aau);
  CHECK(tensorboard::masked_crc32c("abc") == 0x21f1576eu);
  // length (8 bytes LE), masked CRC of the length, payload, masked CRC of the payload
  CHECK(hex(tensorboard::frame("abc")) == "0300000000000000" "b099490e" "616263" "6e57f121");
}

TEST_CASE("tensorboard: Event protos byte for byte as protobuf serialises them", "[tensorboard]") {
  CHECK(hex(tensorboard::scalar_event(1.5, 7, "train/loss", 0.25f)) ==
        "09000000000000f83f10072a130a110a0a747261696e2f6c6f7373150000803e");
  CHECK(hex(tensorboard::file_version_event(2.0)) == "0900000000000000401a0d627261696e2e4576656e743a32");
  CHECK(hex(tensorboard::text_event(2.0, 0, "config", "hi")) ==
        "0900000000000000402a1c0a1a0a06636f6e66696742060807420268694a080a060a0474657874");
}

TEST_CASE("tensorboard: a metrics record becomes SPLIT/KEY scalars, and only lmkit event files are removed", "[tensorboard]") {
  test::TempDir dir;
  { std::ofstream(dir / "events.out.tfevents.1.other") << "x"; }
  std::string path;
  {
    tensorboard::EventWriter w(dir.path.string());
    path = w.path();
    w.record({{"step", 5}, {"split", "valid"}, {"f1", 0.5}, {"per_type", {{"PER", {{"f1", 0.25}}}}}, {"note", "text"}}, 3.0);
  }
  const std::string bytes = read_file(path);
  CHECK(bytes.find("valid/f1") != std::string::npos);
  CHECK(bytes.find("valid/per_type/PER/f1") != std::string::npos);
  CHECK(bytes.find("valid/step") == std::string::npos);
  CHECK(bytes.find("note") == std::string::npos);
  tensorboard::remove_event_files(dir.path.string());
  CHECK(!std::filesystem::exists(path));
  CHECK(std::filesystem::exists(dir / "events.out.tfevents.1.other"));
}
