// HuggingFace tokenizer files: WordPiece semantics on a hand-made tokenizer.json,
// tokenizers sharing a folder, and malformed files. (Agreement with HF's own
// tokenizers on real text: tests/interop/tokenizer_interop.py, in CTest.)
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "../app_runner.h"
#include "../data/data_fixture.h"
#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"

using namespace lmkit;
using tokenizer::Family;
using tokenizer::Tokenizer;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A WordPiece tokenizer.json as HF's BertTokenizer saves one.
Json wordpiece_json() {
  Json vocab = Json::object();
  const char* pieces[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "!", "cafe", "naive", "\xE4\xB8\xAD", "un", "##want", "##ed"};
  for (int i = 0; i < 15; ++i) vocab[pieces[i]] = i;
  Json added = Json::array();
  for (int i = 0; i < 5; ++i) {
    added.push_back({{"id", i}, {"content", pieces[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  }
  Json single = Json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                             {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}});
  Json pair = single;
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  pair.push_back({{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 1}}}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true}, {"strip_accents", nullptr}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
                              {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                                                  {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                     {"max_input_chars_per_word", 100}, {"vocab", vocab}}}};
}

}  // namespace

TEST_CASE("hf tokenizer: WordPiece lower-cases, strips accents, splits punctuation and CJK, matches longest first", "[tokenizer]") {
  test::TempDir dir;
  save_json_file(dir / "tokenizer.json", wordpiece_json());
  const auto tok = Tokenizer::load(dir.path.string());
  CHECK(tok.family() == "bert");
  CHECK(tok.format() == "wordpiece");
  // "Héllo" -> "hello" (NFD, Mn dropped, lower-cased); "WORLDs!" -> world ##s !; 中 is its own word;
  // "unwanted" -> un ##want ##ed; "xyz" has no pieces -> [UNK]; [MASK] written in the text is [MASK].
  CHECK(tok.encode("H\xC3\xA9llo WORLDs! Caf\xC3\xA9\xE4\xB8\xAD unwanted xyz [MASK]") ==
        std::vector<int32_t>{5, 6, 7, 8, 9, 11, 12, 13, 14, 1, 4});
  const auto pair = tok.encode_pair("hello", std::string_view("naive world"));
  CHECK(pair.ids == std::vector<int32_t>{2, 5, 3, 10, 6, 3});
  CHECK(pair.type_ids == std::vector<int32_t>{0, 0, 0, 1, 1, 1});
  CHECK(tok.decode(pair.ids) == "hello naive world");
  CHECK(tok.decode({5, 6, 7, 8}) == "hello worlds!");  // ##s joins; " !" is cleaned up
  CHECK(tok.specials().mask == 4);
  CHECK(tok.is_special(2));
  CHECK_FALSE(tok.is_special(5));
  CHECK_FALSE(tok.starts_word(7));  // ##s continues a word
}

TEST_CASE("hf tokenizer: two tokenizers trained into one folder both load as what they are", "[tokenizer]") {
  test::TempDir dir;
  tokenizer::TrainOptions o;
  o.inputs = {test::sample("valid.txt")};
  o.vocab_size = 600;
  o.threads = 2;
  o.family = "bert", o.output = dir / "bert.model";
  const auto bert = Tokenizer::train(o);
  o.family = "t5", o.output = dir / "t5.model";
  const auto t5 = Tokenizer::train(o);
  for (const char* f : {"bert.lmkit.json", "bert.tokenizer.json", "t5.lmkit.json", "t5.tokenizer.json", "tokenizer.json",
                        "tokenizer_config.json", "special_tokens_map.json"}) {
    CHECK(std::filesystem::exists(dir / f));
  }
  const std::string text = "The game began development in 2010 .";
  const auto b = Tokenizer::load(dir / "bert.model");
  CHECK(b.family() == "bert");
  CHECK(b.encode(text) == bert.encode(text));
  CHECK(Tokenizer::load(dir / "t5.model").family() == "t5");
  // Each one's single-file tokenizer.json (what PreTrainedTokenizerFast(tokenizer_file=...) loads) loads too.
  const auto bj = Tokenizer::load(dir / "bert.tokenizer.json");
  CHECK(bj.family() == "bert");
  CHECK(bj.encode(text) == bert.encode(text));
  CHECK(bj.encode_pair(text, std::string_view(text)).ids == bert.encode_pair(text, std::string_view(text)).ids);
  // The folder itself is the last one trained (HF's AutoTokenizer view of it).
  const auto folder = Tokenizer::load(dir.path.string());
  CHECK(folder.family() == "t5");
  CHECK(folder.encode(text) == t5.encode(text));
  CHECK(folder.vocab_size() == t5.vocab_size());
}

TEST_CASE("hf tokenizer: a checkpoint directory round-trips lmkit's and HF's tokenizers", "[tokenizer]") {
  const auto& f = test::data_fixture("gpt2");
  test::TempDir dir;
  f.tok->save(dir / "ckpt");
  const auto back = Tokenizer::load(dir / "ckpt");
  CHECK(back.family() == "gpt2");
  CHECK(back.checksum() == f.tok->checksum());  // corpora encoded with it stay valid
  CHECK(back.encode("Valkyria Chronicles III") == f.tok->encode("Valkyria Chronicles III"));
  // A HF directory is saved as it came.
  std::filesystem::create_directories(dir / "hf");
  save_json_file(dir / "hf/tokenizer.json", wordpiece_json());
  write(dir / "hf/tokenizer_config.json", R"({"tokenizer_class": "BertTokenizer", "clean_up_tokenization_spaces": true})");
  Tokenizer::load(dir / "hf").save(dir / "hf-saved");
  CHECK(read_file(dir / "hf-saved/tokenizer.json") == read_file(dir / "hf/tokenizer.json"));
  CHECK(Tokenizer::load(dir / "hf-saved").encode("hello worlds") == std::vector<int32_t>{5, 6, 7});
}

TEST_CASE("hf tokenizer: malformed files are one clear error naming the file", "[tokenizer]") {
  test::TempDir dir;
  const std::string full = wordpiece_json().dump();
  std::filesystem::create_directories(dir / "truncated");
  write(dir / "truncated/tokenizer.json", full.substr(0, full.size() / 2));
  CHECK_THROWS_WITH(Tokenizer::load(dir / "truncated"), Catch::Contains("truncated/tokenizer.json:1: malformed JSON"));

  Json unknown = wordpiece_json();
  unknown["model"]["type"] = "WordLevel";
  std::filesystem::create_directories(dir / "unknown");
  save_json_file(dir / "unknown/tokenizer.json", unknown);
  CHECK_THROWS_WITH(Tokenizer::load(dir / "unknown"), Catch::Contains("model type 'WordLevel' is not supported"));

  Json bpe = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}}},
              {"pre_tokenizer", {{"type", "ByteLevel"}}}};
  std::filesystem::create_directories(dir / "no-merges");
  save_json_file(dir / "no-merges/tokenizer.json", bpe);
  CHECK_THROWS_WITH(Tokenizer::load(dir / "no-merges"), Catch::Contains("BPE model has no 'merges'"));
  bpe["model"]["merges"] = Json::array({Json::array({"a", "c"})});
  save_json_file(dir / "no-merges/tokenizer.json", bpe);
  CHECK_THROWS_WITH(Tokenizer::load(dir / "no-merges"), Catch::Contains("uses a token that is not in the vocabulary"));

  std::filesystem::create_directories(dir / "vocab-only");
  write(dir / "vocab-only/vocab.json", R"({"a": 0})");
  CHECK_THROWS_WITH(Tokenizer::load(dir / "vocab-only"), Catch::Contains("vocab.json without merges.txt"));
  CHECK_THROWS_WITH(Tokenizer::load(dir.path.string()), Catch::Contains("no tokenizer here"));

  // Found by the tokenizer fuzzer (tests/fuzz): a number where HF writes true/false
  // escaped as nlohmann's "type must be boolean, but is number", exit 1.
  Json numeric_flag = wordpiece_json();
  numeric_flag["normalizer"]["lowercase"] = 136;
  std::filesystem::create_directories(dir / "numeric-flag");
  save_json_file(dir / "numeric-flag/tokenizer.json", numeric_flag);
  CHECK_THROWS_WITH(Tokenizer::load(dir / "numeric-flag"),
                    Catch::Contains("numeric-flag/tokenizer.json: 'lowercase' must be true or false, got 136"));
  // Any other value of the wrong type (an id that is a string): named, not a raw library message.
  Json string_id = wordpiece_json();
  string_id["model"]["vocab"]["[UNK]"] = "one";
  std::filesystem::create_directories(dir / "string-id");
  save_json_file(dir / "string-id/tokenizer.json", string_id);
  try {
    Tokenizer::load(dir / "string-id");
    FAIL("a string id was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kInput);
    CHECK_THAT(e.what(), Catch::Contains("string-id"));
  }

  // Through an app: one error: line, exit 2.
  const auto r = test::run("lmkit-tokenize inspect --tokenizer " + (dir / "truncated"));
  CHECK(r.code == 2);
  CHECK(r.out.rfind("error: ", 0) == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

TEST_CASE("hf tokenizer: lmkit-tokenize inspect says what a tokenizer is, ids prints HF's ids", "[tokenizer]") {
  test::TempDir dir;
  save_json_file(dir / "tokenizer.json", wordpiece_json());
  const auto r = test::run("lmkit-tokenize inspect --tokenizer " + dir.path.string());
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("family      bert") && Catch::Contains("format      wordpiece") &&
                        Catch::Contains("[CLS] $A [SEP]  |  [CLS] $A [SEP] $B [SEP]"));
  write(dir / "in.txt", "Hello WORLDs!\n");
  const auto ids = test::run("lmkit-tokenize ids --tokenizer " + dir.path.string() + " --input " + (dir / "in.txt") + " --decode");
  CHECK(ids.out == "{\"ids\":[2,5,6,7,8,3],\"text\":\"hello worlds!\",\"type_ids\":[0,0,0,0,0,0]}\n");
}

TEST_CASE("hf tokenizer: the fuzzer's findings are refused with a named error", "[tokenizer]") {
  // tests/fuzz/regressions/tokenizer: inputs the tokenizer fuzzer once crashed on,
  // as it saved them (first byte 0: the rest is a tokenizer.json).
  test::TempDir dir;
  int replayed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/tests/fuzz/regressions/tokenizer")) {
    const std::string bytes = read_file(entry.path().string());
    REQUIRE(!bytes.empty());
    REQUIRE(bytes[0] % 3 == 0);
    const auto folder = dir / entry.path().filename().string();
    std::filesystem::create_directories(folder);
    write(folder + "/tokenizer.json", bytes.substr(1));
    INFO(entry.path());
    try {
      Tokenizer::load(folder);
      FAIL("loaded");
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kInput);
      CHECK_THAT(e.what(), Catch::Contains(entry.path().filename().string()));
    }
    ++replayed;
  }
  CHECK(replayed >= 2);
}


namespace {

// A Llama-shaped tokenizer.json (SentencePiece BPE with byte fallback, Metaspace) in DIR, changed by `edit`.
void write_llama_tokenizer(const std::string& dir, const std::function<void(lmkit::Json&)>& edit) {
  lmkit::Json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int64_t next = 259;
  for (const char* piece : {"\u2581", "a", "b", "\u2581a", "ab"}) vocab[piece] = next++;
  lmkit::Json j = {
      {"version", "1.0"},
      {"added_tokens", lmkit::Json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                           {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                           {{"id", 2}, {"content", "</s>"}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", false}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Sequence"},
                   {"decoders", lmkit::Json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                                    {{"type", "ByteFallback"}},
                                                    {{"type", "Fuse"}},
                                                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                 {"vocab", vocab}, {"merges", lmkit::Json::array({"\u2581 a", "a b"})}}}};
  edit(j);
  std::filesystem::create_directories(dir);
  lmkit::save_json_file(dir + "/tokenizer.json", j);
}

}  // namespace

TEST_CASE("hf files: a Llama-shaped tokenizer.json with a duplicate id, an id gap, no byte pieces or no byte fallback "
          "is one error naming what is wrong",
          "[tokenizer][hf]") {
  lmkit::test::TempDir dir;
  write_llama_tokenizer(dir / "ok", [](lmkit::Json&) {});
  CHECK(lmkit::tokenizer::Tokenizer::load(dir / "ok").vocab_size() == 264);
  const std::vector<std::pair<std::function<void(lmkit::Json&)>, std::string>> cases = {
      {[](lmkit::Json& j) { j["model"]["vocab"]["ab"] = 260; }, "have the same id 260"},
      {[](lmkit::Json& j) { j["model"]["vocab"]["ab"] = 300; }, "has no piece with id 263 (ids must run from 0 to 300 without a gap)"},
      {[](lmkit::Json& j) { j["model"]["vocab"].erase("<0x41>"); j["model"]["vocab"]["ab"] = 68; },
       "needs the 256 byte pieces <0x00> to <0xFF>; <0x41> is not in the vocabulary"},
      {[](lmkit::Json& j) { j["model"]["byte_fallback"] = false; },
       "a SentencePiece-style BPE (Metaspace pre-tokenizer) with byte_fallback false is not supported"},
  };
  int n = 0;
  for (const auto& [edit, error] : cases) {
    const std::string d = dir / ("case" + std::to_string(n++));
    write_llama_tokenizer(d, edit);
    INFO(error);
    CHECK_THROWS_WITH(lmkit::tokenizer::Tokenizer::load(d), Catch::Contains(error) && Catch::Contains("tokenizer.json"));
  }
}
