// Fuzzes the HuggingFace tokenizer-file readers: tokenizer.json (WordPiece, BPE,
// Unigram), vocab.txt (WordPiece) and vocab.json + merges.txt (byte-level BPE).
// The first byte picks the format; a tokenizer that loads then encodes and
// decodes a fixed text that reaches its normaliser, pre-tokenizer and decoder.
#include "fuzz_util.h"
#include "lmkit/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto dir = lmkit::fuzz::scratch() / ("tok" + std::to_string(kind));
  std::filesystem::create_directories(dir);
  std::string path;
  if (kind == 0) {
    lmkit::fuzz::write_file(dir / "tokenizer.json", rest);
    path = (dir / "tokenizer.json").string();
  } else if (kind == 1) {
    lmkit::fuzz::write_file(dir / "vocab.txt", rest);
    path = dir.string();
  } else {
    const auto parts = lmkit::fuzz::split_parts(rest, 2);
    lmkit::fuzz::write_file(dir / "vocab.json", parts[0]);
    lmkit::fuzz::write_file(dir / "merges.txt", parts[1]);
    path = dir.string();
  }
  lmkit::fuzz::expect_input_errors([&] {
    const auto tok = lmkit::tokenizer::Tokenizer::load(path);
    const auto ids = tok.encode("Héllo, WORLD! ça 東京 don't  tabs\there 123 ##x <unk> [MASK]");
    (void)tok.decode(ids);
    const auto pair = tok.encode("a b");
    (void)tok.apply_template(ids, &pair);
  });
  return 0;
}
