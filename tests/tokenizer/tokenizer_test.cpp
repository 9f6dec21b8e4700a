#include <catch2/catch.hpp>

#include <fstream>

#include "../data/data_fixture.h"
#include "lmkit/core/error.h"

using namespace lmkit;
using tokenizer::Family;

TEST_CASE("tokenizer: each family's special tokens sit where HF expects them", "[tokenizer]") {
  const auto& bert = *test::data_fixture("bert").tok;
  CHECK(bert.specials().pad == 0);
  CHECK(bert.piece(bert.specials().cls) == "[CLS]");
  CHECK(bert.piece(bert.specials().sep) == "[SEP]");
  CHECK(bert.piece(bert.specials().mask) == "[MASK]");
  CHECK(bert.is_special(bert.specials().mask));
  CHECK_FALSE(bert.is_special(bert.specials().unk));  // [UNK] is text, maskable
  CHECK(bert.vocab_size() == 2000);

  const auto& gpt = *test::data_fixture("gpt2").tok;
  CHECK(gpt.piece(gpt.specials().eos) == "<|endoftext|>");
  CHECK(gpt.specials().pad == -1);

  const auto& t5 = *test::data_fixture("t5").tok;
  CHECK(t5.specials().pad == 0);
  CHECK(t5.specials().eos == 1);
  CHECK(t5.piece(1) == "</s>");
  CHECK(t5.vocab_size() == 2000);
  CHECK(t5.sentinel(0) == 1999);
  CHECK(t5.sentinel(99) == 1900);
  CHECK(t5.piece(1999) == "<extra_id_0>");
  CHECK(t5.piece(1900) == "<extra_id_99>");
  CHECK(t5.is_special(1950));
  CHECK_THROWS_AS(t5.sentinel(100), Error);
}

TEST_CASE("tokenizer: encode -> decode round-trips a WikiText-2 sample exactly", "[tokenizer]") {
  for (Family family : {"bert", "gpt2", "t5"}) {
    const auto& tok = *test::data_fixture(family).tok;
    std::ifstream in(test::sample("train.txt"));
    std::string line;
    int checked = 0;
    while (std::getline(in, line) && checked < 400) {
      if (line.find_first_not_of(' ') == std::string::npos) continue;
      // SentencePiece drops the leading space it uses as a word marker.
      const std::string text = line.substr(line.find_first_not_of(' '));
      INFO(text);
      // Special tokens written in the text ("<unk>" in WikiText) are those tokens, as in HF; kept, they print as written.
      REQUIRE(tok.decode(tok.encode(text), /*keep_special=*/true) == text);
      ++checked;
    }
    CHECK(checked == 400);
    // Characters never seen in training come back through byte fallback.
    const std::string rare = "Ελληνικά 漢字 ∮ emoji 🙂";
    CHECK(tok.decode(tok.encode(rare)) == rare);
  }
}

TEST_CASE("tokenizer: loading infers the family and refuses non-models", "[tokenizer]") {
  const auto& f = test::data_fixture("t5");
  test::TempDir dir;
  // Without tokenizer_config.json beside it, the family comes from the pieces.
  std::filesystem::copy_file(*f.dir / "tok.model", dir / "spiece.model");
  auto t5 = tokenizer::Tokenizer::load(dir / "spiece.model");
  CHECK(t5.family() == "t5");
  CHECK(t5.checksum() == f.tok->checksum());
  CHECK(t5.encode("The game began") == f.tok->encode("The game began"));
  { std::ofstream(dir / "junk.model") << "not a model"; }
  CHECK_THROWS_WITH(tokenizer::Tokenizer::load(dir / "junk.model"), Catch::Contains("not a SentencePiece model"));
  CHECK_THROWS_WITH(tokenizer::Tokenizer::load(dir / "none.model"), Catch::Contains("none.model: no such tokenizer"));
  CHECK_THROWS_WITH(tokenizer::Tokenizer::load(dir / "spiece.model", "bert"), Catch::Contains("not a bert tokenizer"));
}

TEST_CASE("tokenizer: training refuses bad requests", "[tokenizer]") {
  test::TempDir dir;
  tokenizer::TrainOptions o;
  o.inputs = {dir / "none.txt"};
  o.output = dir / "t.model";
  CHECK_THROWS_WITH(tokenizer::Tokenizer::train(o), Catch::Contains("none.txt: no such file"));
  { std::ofstream(dir / "empty.txt"); }
  o.inputs = {dir / "empty.txt"};
  CHECK_THROWS_WITH(tokenizer::Tokenizer::train(o), Catch::Contains("empty"));
  // Blank lines alone: SentencePiece's "check [!sentences_.empty()] failed", in the user's terms.
  { std::ofstream(dir / "blank.txt") << "\n\n\n"; }
  o.inputs = {dir / "blank.txt"};
  CHECK_THROWS_WITH(tokenizer::Tokenizer::train(o), Catch::StartsWith("tokenizer training: no sentence to learn from"));
  o.inputs = {test::sample("valid.txt")};
  { std::ofstream(dir / "t.bin") << "a file"; }
  o.output = dir / "t.bin";
  CHECK_THROWS_WITH(tokenizer::Tokenizer::train(o), Catch::Contains("is a file: name a directory or a .model file"));
  CHECK_THROWS_WITH(tokenizer::parse_family("xlnet"), Catch::Contains("unknown tokenizer family 'xlnet'"));
}
