#include <catch2/catch.hpp>

#include <fstream>

#include "data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/data/text.h"

using namespace lmkit;

TEST_CASE("text: WikiText articles become documents and paragraphs become sentences", "[data][text]") {
  auto docs = data::read_documents(test::sample("train.txt"));
  CHECK(docs.size() == 60);  // the sample's 60 articles
  CHECK(docs[0].sentences[0] == "= Valkyria Chronicles III =");
  auto s = data::split_sentences("It met with positive sales . After release , it sold . \"Yes\" , he said ! 3 more ? no");
  REQUIRE(s.size() == 4);
  CHECK(s[0] == "It met with positive sales .");
  CHECK(s[1] == "After release , it sold .");
  CHECK(s[3] == "3 more ? no");
  CHECK(data::is_wikitext_title(" = Gameplay = "));
  CHECK_FALSE(data::is_wikitext_title(" = = Gameplay = = "));
}

TEST_CASE("text: blank-line, lines and JSONL formats and their errors", "[data][text]") {
  test::TempDir dir;
  { std::ofstream(dir / "a.txt") << "First doc . Second sentence .\n\nSecond doc .\n"; }
  CHECK(data::read_documents(dir / "a.txt").size() == 2);
  CHECK(data::read_documents(dir / "a.txt", data::TextFormat::kLines).size() == 2);
  { std::ofstream(dir / "b.jsonl") << "{\"text\": \"One . Two .\"}\n{\"text\": \"Three .\"}\n"; }
  auto docs = data::read_documents(dir / "b.jsonl");
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].sentences.size() == 2);
  { std::ofstream(dir / "c.jsonl") << "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "c.jsonl"), Catch::Contains("c.jsonl:2: no string field 'text'"));
  { std::ofstream(dir / "d.jsonl") << "{not json\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "d.jsonl"), Catch::Contains("d.jsonl:1: malformed JSON"));
}

TEST_CASE("corpus: encoding is identical whatever the thread count and matches the tokenizer", "[data][corpus]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  data::encode_corpus(*f.tok, {{test::sample("train.txt")}, data::TextFormat::kAuto, "text", dir / "one", 1});
  CHECK(read_file(dir / "one/tokens.bin") == read_file(f.corpus_path + "/tokens.bin"));
  CHECK(read_file(dir / "one/sentences.bin") == read_file(f.corpus_path + "/sentences.bin"));
  const data::Corpus& c = *f.corpus;
  CHECK(c.num_documents() == 60);
  CHECK(c.num_tokens() > 100000);
  // The first sentence decodes back to the text.
  std::vector<int32_t> ids;
  c.append_tokens(c.sentence_begin(0), c.sentence_end(0), ids);
  CHECK(f.tok->decode(ids) == "= Valkyria Chronicles III =");
  CHECK_NOTHROW(c.check_tokenizer(*f.tok));
  CHECK_THROWS_WITH(c.check_tokenizer(*test::data_fixture("gpt2").tok),
                    Catch::Contains("different tokenizer"));
  CHECK_THROWS_WITH(c.check_vocab(1000, "bert-tiny"), Catch::Contains("exceeds bert-tiny's"));
}

TEST_CASE("corpus: empty input and damaged corpora are refused", "[data][corpus]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  { std::ofstream(dir / "empty.txt") << "\n \n"; }
  CHECK_THROWS_WITH(data::encode_corpus(*f.tok, {{dir / "empty.txt"}, data::TextFormat::kAuto, "text", dir / "c", 1}),
                    Catch::Contains("empty corpus"));
  CHECK_FALSE(std::filesystem::exists(dir / "c"));
  CHECK_THROWS_WITH(data::Corpus(dir / "nothing"), Catch::Contains("not a token corpus"));
  std::filesystem::copy(f.corpus_path, dir / "cut");
  const std::string tokens = read_file(dir / "cut/tokens.bin");
  write_file_atomic(dir / "cut/tokens.bin", tokens.substr(0, tokens.size() - 10));
  CHECK_THROWS_WITH(data::Corpus(dir / "cut"), Catch::Contains("damaged corpus"));
}

TEST_CASE("corpus: every index entry and token id is checked at open, not only the last", "[data][corpus]") {
  // Damaged inner entries used to crash the datasets (SIGSEGV/SIGBUS) or silently change
  // the example count; each is now one InputError naming the file.
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  auto damage = [&](const std::string& name, const std::string& file, size_t byte_offset, const std::string& bytes) {
    std::filesystem::copy(f.corpus_path, dir / name);
    const std::string path = dir / name + "/" + file;
    std::string data = read_file(path);
    REQUIRE(byte_offset + bytes.size() <= data.size());
    data.replace(byte_offset, bytes.size(), bytes);
    write_file_atomic(path, data);
    return dir / name;
  };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  const data::Corpus good(f.corpus_path);
  REQUIRE(good.num_sentences() > 4);
  REQUIRE(good.num_documents() > 2);
  CHECK_THROWS_WITH(data::Corpus(damage("s-huge", "sentences.bin", 8 * 2, u64(uint64_t{1} << 63))),
                    Catch::Contains("sentences.bin: offset 2 is 9223372036854775808"));
  CHECK_THROWS_WITH(data::Corpus(damage("s-down", "sentences.bin", 8 * 3, u64(0))), Catch::Contains("offsets must grow"));
  CHECK_THROWS_WITH(data::Corpus(damage("s-first", "sentences.bin", 0, u64(5))), Catch::Contains("the first offset is 5"));
  CHECK_THROWS_WITH(data::Corpus(damage("d-huge", "documents.bin", 8, u64(good.num_sentences() + 1))),
                    Catch::Contains("documents.bin: offset 1"));
  CHECK_THROWS_WITH(data::Corpus(damage("t-id", "tokens.bin", 2 * 7, std::string("\xff\xff", 2))),
                    Catch::Contains("tokens.bin: token 7 is id 65535, outside the vocabulary"));
  // Header counts whose sizes would overflow, and a vocabulary the dtype cannot hold.
  for (const auto& [key, value] : {std::pair<std::string, Json>{"sentences", -1}, {"tokens", int64_t{1} << 62},
                                   {"vocab_size", 100000}}) {
    const std::string name = "h-" + key;
    std::filesystem::copy(f.corpus_path, dir / name);
    const std::string header = dir / name + "/header.json";
    Json h = load_json_file(header);
    h[key] = value;
    save_json_file(header, h);
    CHECK_THROWS_WITH(data::Corpus(dir / name), Catch::Contains("damaged corpus"));
  }
}
