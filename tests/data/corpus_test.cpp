#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "app_runner.h"
#include "data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/config.h"
#include "lmkit/core/file.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/parquet.h"
#include "lmkit/data/text.h"
#include "lmkit/data/text_input.h"
#include "lmkit/data/tokenizer_text.h"
#include "lmkit/eval/perplexity.h"

using namespace lmkit;
namespace fs = std::filesystem;

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
  CHECK_THROWS_WITH(data::read_documents(dir / "c.jsonl"),
                    Catch::Contains("c.jsonl:2: no field 'text' (--text-field names the field of texts)"));
  { std::ofstream(dir / "n.jsonl") << "{\"text\": \"ok\"}\n{\"text\": 5}\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "n.jsonl"), Catch::Contains("n.jsonl:2: field 'text' holds a number, not text"));
  { std::ofstream(dir / "l.jsonl") << "[\"text\"]\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "l.jsonl"), Catch::Contains("l.jsonl:1: a JSON array, not an object with a field 'text'"));
  // A null text (HF datasets' to_json writes one for None) is no document, as a null in a Parquet column.
  { std::ofstream(dir / "e.jsonl") << "{\"text\": \"One .\"}\n{\"text\": null}\n{\"text\": \"Two .\"}\n"; }
  CHECK(data::read_documents(dir / "e.jsonl").size() == 2);
  { std::ofstream(dir / "d.jsonl") << "{not json\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "d.jsonl"), Catch::Contains("d.jsonl:1: malformed JSON"));
  // *.json is JSON lines, compressed or not (a C4 shard decompressed): it was read as plain text, one
  // document of '{"text": ...' lines.
  // A leading UTF-8 byte-order mark (Windows editors write one) is no text, plain or compressed: it
  // reached the corpus as three byte tokens before the first word.
  { std::ofstream(dir / "bom.txt") << "\xEF\xBB\xBF" << "First doc . Second sentence .\n\nSecond doc .\n"; }
  REQUIRE(test::run_shell("gzip -c " + (dir / "bom.txt") + " > " + (dir / "bom.txt.gz")).code == 0);
  for (const std::string& bom : {dir / "bom.txt", dir / "bom.txt.gz"}) {
    INFO(bom);
    const auto with_bom = data::read_documents(bom);
    REQUIRE(with_bom.size() == 2);
    CHECK(with_bom[0].sentences == data::read_documents(dir / "a.txt")[0].sentences);
  }
  fs::copy_file(dir / "b.jsonl", dir / "b.json");
  CHECK(data::read_documents(dir / "b.json").size() == 2);
  { std::ofstream(dir / "p.json") << "[\n  {\"text\": \"One .\"}\n]\n"; }
  CHECK_THROWS_WITH(data::read_documents(dir / "p.json"),
                    Catch::Contains("p.json:1: '[' alone on a line: a JSON document over several lines, not JSON lines"));
}

TEST_CASE("corpus: encoding is identical whatever the thread count and matches the tokenizer", "[data][corpus]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  data::encode_corpus(*f.tok, {{test::sample("train.txt")}, data::TextFormat::kAuto, "text", dir / "one", 1});
  CHECK(read_file(dir / "one/tokens.bin") == read_file(f.corpus_path + "/tokens.bin"));
  CHECK(read_file(dir / "one/sentences.bin") == read_file(f.corpus_path + "/sentences.bin"));
  // Streamed in batches of 4 KiB of text (about 250 of them here) instead of 32 MiB: the same corpus.
  data::EncodeOptions small{{test::sample("train.txt")}, data::TextFormat::kAuto, "text", dir / "batched", 2};
  small.batch_bytes = 4096;
  data::encode_corpus(*f.tok, small);
  for (const char* file : {"tokens.bin", "sentences.bin", "documents.bin", "header.json"}) {
    INFO(file);
    CHECK(read_file(dir / (std::string("batched/") + file)) == read_file(f.corpus_path + "/" + file));
  }
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

// Corpora as shipped (data/text_input.h): gzip and zstd JSONL, written by the reference writers
// (Python's gzip module, the zstd command), encode to the same token corpus as the plain JSONL,
// byte for byte; a damaged or truncated stream is an error naming the file and line; what is
// not text (other archives, NUL bytes, another encoding) or a damaged Parquet file is refused by name.
namespace {

// ~1.1 MB of JSONL (the sample's articles, one a line): several of the reader's buffers.
std::string shipped_jsonl(const test::TempDir& dir) {
  const auto docs = data::read_documents(test::sample("train.txt"));
  std::ofstream out(dir / "plain.jsonl");
  for (const auto& d : docs) {
    std::string text;
    for (const auto& s : d.sentences) text += (text.empty() ? "" : "\n") + s;
    out << Json{{"text", text}, {"id", text.size()}}.dump() << "\n";
  }
  return dir / "plain.jsonl";
}

void run_reference_writer(const std::string& cmd) {
  const auto r = test::run_shell(cmd + " 2>&1");
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.code == 0);
}

// The corpus files of encoding `input` into `out`.
std::vector<std::string> shipped_corpus_files(const tokenizer::Tokenizer& tok, const std::string& input, const std::string& out) {
  data::encode_corpus(tok, {{input}, data::TextFormat::kAuto, "text", out, 2});
  return {read_file(out + "/tokens.bin"), read_file(out + "/sentences.bin"), read_file(out + "/documents.bin")};
}

void write_raw_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

TEST_CASE("text input: gzip and zstd JSONL encode to the plain JSONL's corpus, byte for byte", "[data][text]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  run_reference_writer("python3 -c \"import gzip, shutil; shutil.copyfileobj(open('" + plain + "', 'rb'), gzip.open('" + (dir / "a.jsonl.gz") +
        "', 'wb'))\"");
  run_reference_writer("zstd -q -19 -o " + (dir / "a.jsonl.zst") + " " + plain);
  // C4's naming (.json.gz), and two gzip members one after the other (as pigz or cat of shards writes them).
  run_reference_writer("head -c 500000 " + plain + " | head -n -1 > " + (dir / "first") + " && tail -n +$(($(wc -l < " + (dir / "first") +
        ") + 1)) " + plain + " > " + (dir / "second") + " && gzip -c " + (dir / "first") + " > " + (dir / "c4.json.gz") +
        " && gzip -c " + (dir / "second") + " >> " + (dir / "c4.json.gz"));
  // Two zstd frames likewise.
  run_reference_writer("zstd -q -c " + (dir / "first") + " > " + (dir / "two.jsonl.zst") + " && zstd -q -c " + (dir / "second") + " >> " +
        (dir / "two.jsonl.zst"));
  // A long-distance window declared by a streamed frame (zstd --long=31 from a pipe: 2 GiB, the
  // largest there is), which libzstd's default limit (128 MiB) refuses as the zstd command does
  // without --long=31; the frame holds the window it needs and no more is allocated for it.
  run_reference_writer("cat " + plain + " | zstd -q --long=31 -c > " + (dir / "long.jsonl.zst"));
  const auto want = shipped_corpus_files(*f.tok, plain, dir / "c-plain");
  CHECK(data::sniff_text_file(dir / "a.jsonl.gz") == data::Compression::kGzip);
  CHECK(data::sniff_text_file(dir / "a.jsonl.zst") == data::Compression::kZstd);
  for (const std::string name : {"a.jsonl.gz", "a.jsonl.zst", "c4.json.gz", "two.jsonl.zst", "long.jsonl.zst"}) {
    INFO(name);
    CHECK(shipped_corpus_files(*f.tok, dir / name, dir / ("c-" + name)) == want);
  }
}

TEST_CASE("text input: a truncated or damaged stream names the file and line, never a shorter corpus", "[data][text]") {
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  run_reference_writer("gzip -c " + plain + " > " + (dir / "a.jsonl.gz") + " && zstd -q -c " + plain + " > " + (dir / "a.jsonl.zst"));
  for (const std::string ext : {"gz", "zst"}) {
    INFO(ext);
    const std::string whole = read_file(dir / ("a.jsonl." + ext));
    write_raw_bytes(dir / ("cut.jsonl." + ext), whole.substr(0, whole.size() * 2 / 3));
    CHECK_THROWS_WITH(data::read_documents(dir / ("cut.jsonl." + ext)),
                      Catch::Contains("cut.jsonl." + ext + ":") && Catch::Contains("truncated"));
    // A damaged checksum (gzip's CRC-32 trailer, zstd's frame checksum): the stream's own check fails.
    std::string damaged = whole;
    const size_t crc = ext == "gz" ? damaged.size() - 8 : damaged.size() - 4;
    damaged[crc] = static_cast<char>(damaged[crc] ^ 0x5a);
    write_raw_bytes(dir / ("bad.jsonl." + ext), damaged);
    CHECK_THROWS_WITH(data::read_documents(dir / ("bad.jsonl." + ext)),
                      Catch::Contains("bad.jsonl." + ext + ":") && Catch::Contains("damaged " + std::string(ext == "gz" ? "gzip" : "zstd")));
    // Damaged bytes in the middle: an error naming the file and a line, whichever check meets them first
    // (the decompressor's, or the JSON reader's on what it made of them).
    damaged = whole;
    for (size_t i = damaged.size() / 2; i < damaged.size() / 2 + 64; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    write_raw_bytes(dir / ("mid.jsonl." + ext), damaged);
    CHECK_THROWS_WITH(data::read_documents(dir / ("mid.jsonl." + ext)),
                      Catch::Matches(".*mid\\.jsonl\\." + ext + ":[0-9]+: .*(damaged|malformed JSON|no field|holds a|a JSON).*",
                                     Catch::CaseSensitive::Yes));
  }
}

TEST_CASE("text input: a damaged Parquet file, other archives, NUL bytes and another encoding are refused by name", "[data][text]") {
  test::TempDir dir;
  write_raw_bytes(dir / "shard.parquet", std::string("PAR1\x15\x04\x15\x10", 8) + std::string(100, 'x'));
  // Read as Parquet by its magic bytes, and refused as what it is: no readable file behind them.
  CHECK_THROWS_WITH(data::read_documents(dir / "shard.parquet"),
                    Catch::Contains("shard.parquet: ") && Catch::Contains("Parquet file"));
  write_raw_bytes(dir / "a.txt.bz2", "BZh91AY&SY" + std::string(64, '\x01'));
  CHECK_THROWS_WITH(data::read_documents(dir / "a.txt.bz2"), Catch::Contains("bzip2-compressed"));
  write_raw_bytes(dir / "a.txt.xz", std::string("\xfd" "7zXZ\0\0\x04", 8) + std::string(64, 'y'));
  CHECK_THROWS_WITH(data::read_documents(dir / "a.txt.xz"), Catch::Contains("xz-compressed"));
  write_raw_bytes(dir / "model.bin", std::string("text\0\0\0\x01more", 12));
  CHECK_THROWS_WITH(data::read_documents(dir / "model.bin"), Catch::Contains("model.bin: holds NUL bytes"));
  // A NUL byte past the sniffed first 64 KiB is refused with its line, in every line-read format.
  std::string late;
  for (int i = 0; i < 5000; ++i) late += "A sentence of text here .\n";
  late += std::string("late\0byte .\n", 12) + "More .\n";
  write_raw_bytes(dir / "late.txt", late);
  CHECK_THROWS_WITH(data::read_documents(dir / "late.txt"), Catch::Contains("late.txt:5001: a NUL byte"));
  CHECK_THROWS_WITH(data::read_documents(dir / "late.txt", data::TextFormat::kLines), Catch::Contains("late.txt:5001: a NUL byte"));
  run_reference_writer("gzip -c " + (dir / "late.txt") + " > " + (dir / "late.txt.gz"));
  CHECK_THROWS_WITH(data::read_documents(dir / "late.txt.gz"), Catch::Contains("late.txt.gz:5001: a NUL byte"));
  std::string latin1;
  for (int i = 0; i < 200; ++i) latin1 += "caf\xe9 cr\xe8me ";
  write_raw_bytes(dir / "latin1.txt", latin1);
  CHECK_THROWS_WITH(data::read_documents(dir / "latin1.txt"), Catch::Contains("latin1.txt: is not UTF-8 text"));
  // Compressed bytes that are not text inside: refused after decompression, by name.
  run_reference_writer("head -c 4096 /dev/urandom | gzip -c > " + (dir / "noise.jsonl.gz"));
  CHECK_THROWS_WITH(data::read_documents(dir / "noise.jsonl.gz"), Catch::Contains("noise.jsonl.gz: its decompressed data"));
  // A few accented letters in UTF-8 text are text.
  write_raw_bytes(dir / "ok.txt", "Caf\xc3\xa9 cr\xc3\xa8me . Fin .\n");
  CHECK(data::read_documents(dir / "ok.txt").size() == 1);
}

TEST_CASE("apps: lmkit-tokenize encode reads .jsonl.gz, a directory or pattern of shards, and refuses a damaged Parquet file", "[apps][text]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  run_reference_writer("gzip -c " + plain + " > " + (dir / "a.jsonl.gz"));
  const std::string tok = *f.dir / "tok.model";
  auto r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "gz") + " --input " + (dir / "a.jsonl.gz"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "pl") + " --input " + plain);
  REQUIRE(r.code == 0);
  CHECK(read_file(dir / "gz/tokens.bin") == read_file(dir / "pl/tokens.bin"));
  // Shards: a directory of them, or a quoted pattern, read in name order, is the corpus of the whole.
  fs::create_directories(dir / "shards");
  run_reference_writer("cd " + (dir / "shards") + " && split -l 20 -d --additional-suffix=.jsonl " + plain + " part- && for f in part-*; do zstd -q --rm $f; done"
                       " && touch .hidden");
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "dir") + " --input " + (dir / "shards"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_file(dir / "dir/tokens.bin") == read_file(dir / "pl/tokens.bin"));
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "glob") + " --input '" + (dir / "shards") +
                "/part-*.zst'");
  REQUIRE(r.code == 0);
  CHECK(read_file(dir / "glob/tokens.bin") == read_file(dir / "pl/tokens.bin"));
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "none") + " --input '" + (dir / "shards") +
                "/*.parquet'");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("the pattern matches no file"));
  // A flag that no input would use is refused, not ignored: --text-field of plain text.
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "tf") + " --input " + plain +
                " --format lines --text-field body");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("error: --text-field body: no input has fields to name") &&
                        Catch::Contains("--format lines reads each input as plain text"));
  CHECK_FALSE(fs::exists(dir / "tf"));
  write_raw_bytes(dir / "shard.parquet", std::string("PAR1", 4) + std::string(100, 'x'));
  r = test::run("lmkit-tokenize encode --tokenizer " + tok + " --output " + (dir / "pq") + " --input " + (dir / "shard.parquet"));
  CHECK(r.code == (data::parquet_available() ? 2 : 1));  // damaged input, or a build without Parquet (sanitizers')
  CHECK_THAT(r.out, Catch::StartsWith("error: ") && Catch::Contains("Parquet file"));
}

TEST_CASE("text: text_bytes counts the text, not its compression or the JSON around it", "[data][text]") {
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  int64_t expected = 0;  // each text and one byte for its end
  for (const auto& line : read_lines(plain)) expected += static_cast<int64_t>(Json::parse(line)["text"].get<std::string>().size()) + 1;
  run_reference_writer("gzip -c " + plain + " > " + (dir / "a.jsonl.gz") + " && zstd -q -c " + plain + " > " + (dir / "a.jsonl.zst") +
                       " && gzip -c " + test::sample("valid.txt") + " > " + (dir / "valid.txt.gz"));
  // bits per byte divided by the compressed size (3.0x too high for .gz) or by the JSON's bytes.
  CHECK(data::text_bytes(plain) == expected);
  CHECK(data::text_bytes(dir / "a.jsonl.gz") == expected);
  CHECK(data::text_bytes(dir / "a.jsonl.zst") == expected);
  CHECK(data::text_bytes(test::sample("valid.txt")) == static_cast<int64_t>(fs::file_size(test::sample("valid.txt"))));
  CHECK(data::text_bytes(dir / "valid.txt.gz") == static_cast<int64_t>(fs::file_size(test::sample("valid.txt"))));
  // A byte-order mark is no text: the readers leave it out, and so does the count (it was 3 bytes more, plain).
  write_raw_bytes(dir / "bom.txt", "\xEF\xBB\xBFSome text .\n");
  run_reference_writer("gzip -c " + (dir / "bom.txt") + " > " + (dir / "bom.txt.gz"));
  CHECK(data::text_bytes(dir / "bom.txt") == 12);
  CHECK(data::text_bytes(dir / "bom.txt.gz") == 12);
  CHECK(data::read_text(dir / "bom.txt") == "Some text .\n");
  CHECK(data::read_text(dir / "bom.txt.gz") == "Some text .\n");
}

TEST_CASE("corpus: a directory or pattern of shards opens as one corpus, cached by every shard's path, size and time", "[data][corpus]") {
  const auto& f = test::data_fixture("bert");
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  fs::create_directories(dir / "shards");
  run_reference_writer("cd " + (dir / "shards") + " && split -l 20 -d --additional-suffix=.jsonl " + plain +
                       " part- && for f in part-*; do zstd -q --rm $f; done && touch .hidden");
  const std::string cache = dir / "cache";
  auto whole = data::open_corpus(plain, *f.tok, cache, "file");
  auto shards = data::open_corpus(dir / "shards", *f.tok, cache, "dir");
  auto pattern = data::open_corpus((dir / "shards") + "/part-*.zst", *f.tok, cache, "glob");
  CHECK(data::text_files(dir / "shards").size() > 2);
  CHECK(shards->name() == dir / "shards");
  for (const auto* c : {shards.get(), pattern.get()}) {
    CHECK(read_file(c->path() + "/tokens.bin") == read_file(whole->path() + "/tokens.bin"));
    CHECK(read_file(c->path() + "/documents.bin") == read_file(whole->path() + "/documents.bin"));
  }
  // Opened again: the cached corpus; one shard more: another corpus, the longer by that shard.
  CHECK(data::open_corpus(dir / "shards", *f.tok, cache, "dir")->path() == shards->path());
  fs::copy_file(dir / "shards/part-00.jsonl.zst", dir / "shards/part-99.jsonl.zst");
  auto more = data::open_corpus(dir / "shards", *f.tok, cache, "dir");
  CHECK(more->path() != shards->path());
  CHECK(more->num_documents() == shards->num_documents() + 20);
  // A file's key is as before shards were read: a run's cached corpus is found again.
  const auto stamp = fs::last_write_time(plain).time_since_epoch().count();
  CHECK(whole->path() == cache + "/file-" + std::to_string(tokenizer::fnv1a64(fs::absolute(plain).string() + "|" +
                                                                         std::to_string(fs::file_size(plain)) + "|" +
                                                                         std::to_string(stamp) + "|" +
                                                                         std::to_string(f.tok->checksum()))));
  fs::remove(dir / "shards/part-99.jsonl.zst");
  // Another field of the same lines (lmkit-pretrain --text-field): the texts moved to "body" give the
  // corpus of "text", cached under a key of its own.
  {
    std::ifstream in(plain);
    std::ofstream out(dir / "body.jsonl");
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      out << Json{{"body", j["text"]}, {"text", 7}}.dump() << "\n";
    }
  }
  auto body = data::open_corpus(dir / "body.jsonl", *f.tok, cache, "file", "body");
  CHECK(read_file(body->path() + "/tokens.bin") == read_file(whole->path() + "/tokens.bin"));
  CHECK(read_file(body->path() + "/documents.bin") == read_file(whole->path() + "/documents.bin"));
  CHECK_THROWS_WITH(data::open_corpus(dir / "body.jsonl", *f.tok, cache, "text"),
                    Catch::Contains("body.jsonl:1: field 'text' holds a number, not text"));
  // A field that no input has is refused (pretrain's --text-field, evaluate's), not ignored.
  CHECK_NOTHROW(data::check_text_field_used({dir / "body.jsonl"}, "body", "--text-field"));
  CHECK_NOTHROW(data::check_text_field_used({test::sample("valid.txt")}, "text", "--text-field"));
  CHECK_THROWS_WITH(data::check_text_field_used({test::sample("valid.txt")}, "body", "--text-field"),
                    Catch::Contains("--text-field body: no text input has fields to name") && Catch::Contains("valid.txt is read as plain text"));
  CHECK_THROWS_WITH(data::check_text_field_used({}, "body", "--text-field"), Catch::Contains("every input is a token corpus"));
  const eval::TextStats by_field = eval::text_stats(dir / "body.jsonl", "body"), by_text = eval::text_stats(plain);
  CHECK(by_field.words == by_text.words);
  CHECK(by_field.bytes == by_text.bytes);
  // Per-word and per-byte figures count the shards' texts as the file's.
  const eval::TextStats a = eval::text_stats(plain), b = eval::text_stats(dir / "shards");
  CHECK(a.words == b.words);
  CHECK(a.bytes == b.bytes);
  CHECK(a.words > 100);
  // What is not text, by name.
  fs::create_directories(dir / "ckpt");
  { std::ofstream(dir / "ckpt/config.json") << "{}\n"; }
  CHECK_THROWS_WITH(data::text_files(dir / "ckpt"), Catch::Contains("ckpt: a model checkpoint directory, not text or a token corpus"));
  CHECK_THROWS_WITH(data::text_files(dir / "missing.txt"), Catch::EndsWith("missing.txt: no such text file or corpus directory"));
  CHECK_THROWS_WITH(data::text_files((dir / "shards") + "/*.parquet"), Catch::Contains("the pattern matches no file"));
}

TEST_CASE("tokenizer text: the sentences of JSONL, compressed and sampled inputs, as the trainer reads lines", "[data][text]") {
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  std::vector<std::string> sentences;
  for (const auto& d : data::read_documents(plain)) sentences.insert(sentences.end(), d.sentences.begin(), d.sentences.end());
  // No more than --max-sentences: every sentence, in order, a line each.
  CHECK(data::write_training_sentences({plain}, data::TextFormat::kAuto, "text", 1 << 20, dir / "all.txt") ==
        static_cast<int64_t>(sentences.size()));
  CHECK(read_lines(dir / "all.txt") == sentences);
  // More: a uniform sample of that many, kept in input order, the same on every call.
  CHECK(data::write_training_sentences({plain}, data::TextFormat::kAuto, "text", 50, dir / "s1.txt") ==
        static_cast<int64_t>(sentences.size()));
  const auto sample = read_lines(dir / "s1.txt");
  REQUIRE(sample.size() == 50);
  size_t at = 0, last = 0;
  for (const auto& line : sample) {
    while (at < sentences.size() && sentences[at] != line) ++at;
    REQUIRE(at < sentences.size());  // a sentence of the input, after the one before it
    last = at++;
  }
  CHECK(last > sentences.size() / 2);  // drawn from the whole input, not its first 50
  data::write_training_sentences({plain}, data::TextFormat::kAuto, "text", 50, dir / "s2.txt");
  CHECK(read_file(dir / "s2.txt") == read_file(dir / "s1.txt"));
  // Plain text goes to the trainer as it is; JSONL, compressed text and Parquet through the sentences.
  CHECK(data::trainer_reads_directly(test::sample("train.txt"), data::TextFormat::kAuto));
  CHECK_FALSE(data::trainer_reads_directly(plain, data::TextFormat::kAuto));
  run_reference_writer("gzip -c " + test::sample("train.txt") + " > " + (dir / "train.txt.gz"));
  CHECK_FALSE(data::trainer_reads_directly(dir / "train.txt.gz", data::TextFormat::kAuto));
  { std::ofstream(dir / "bom.txt") << "\xEF\xBB\xBF" << "A document .\n"; }
  CHECK_FALSE(data::trainer_reads_directly(dir / "bom.txt", data::TextFormat::kAuto));
  { std::ofstream(dir / "crlf.txt") << "A document .\r\nIts second line .\r\n"; }
  CHECK_FALSE(data::trainer_reads_directly(dir / "crlf.txt", data::TextFormat::kAuto));  // '\r' would be a piece
  { std::ofstream(dir / "none.jsonl") << "{\"text\": null}\n\n"; }
  CHECK_THROWS_WITH(data::write_training_sentences({dir / "none.jsonl"}, data::TextFormat::kAuto, "text", 10, dir / "n.txt"),
                    Catch::Contains("none.jsonl: no text to train a tokenizer on"));
  CHECK_FALSE(fs::exists(dir / "n.txt"));
}

TEST_CASE("apps: a tokenizer trained on JSONL learns its texts, the same from .jsonl.gz, and lmkit-pretrain trains one on it", "[apps][text]") {
  test::TempDir dir;
  const std::string plain = shipped_jsonl(dir);
  run_reference_writer("gzip -c " + plain + " > " + (dir / "a.jsonl.gz"));
  auto train = [&](const std::string& input, const std::string& out) {
    // The thread count pretrain's tokenizer takes too (SentencePiece's trainer gives other pieces on another).
    const auto r = test::run("lmkit-tokenize train --family gpt2 --vocab-size 400 --output " + (dir / out) +
                             " --input " + input);
    INFO(r.out);
    REQUIRE(r.code == 0);
    return read_file(dir / (out + "/tokenizer.json"));
  };
  const std::string from_jsonl = train(plain, "t-jsonl");
  // SentencePiece's trainer, reading the JSONL file itself, learned '{"text": ' and the JSON escapes.
  for (const auto& [piece, _] : Json::parse(from_jsonl)["model"]["vocab"].get<std::vector<std::pair<std::string, double>>>()) {
    INFO(piece);
    CHECK(piece.find('{') == std::string::npos);
    CHECK(piece.find("text\"") == std::string::npos);
  }
  CHECK(train(dir / "a.jsonl.gz", "t-gz") == from_jsonl);
  // lmkit-tokenize ids reads a compressed file's lines (it tokenized the gzip bytes, exit 0).
  run_reference_writer("gzip -c " + test::sample("valid.txt") + " > " + (dir / "valid.txt.gz"));
  const auto ids_plain = test::run("lmkit-tokenize ids --tokenizer " + (dir / "t-jsonl") + " --input " + test::sample("valid.txt"));
  const auto ids_gz = test::run("lmkit-tokenize ids --tokenizer " + (dir / "t-jsonl") + " --input " + (dir / "valid.txt.gz"));
  CHECK(ids_gz.code == 0);
  CHECK(ids_gz.out == ids_plain.out);
  // lmkit-pretrain without --tokenizer trains it on the same texts (it refused .jsonl.gz).
  const auto r = test::run("lmkit-pretrain --model " + test::source_dir() + "/models/gpt-mini.json" + " --train " + (dir / "a.jsonl.gz") +
                           " --output " + (dir / "run") + " --vocab-size 400 --steps 1 --batch-size 2 --seq-len 32 --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(read_file(dir / "run/final/tokenizer.json") == from_jsonl);
  CHECK(std::none_of(fs::directory_iterator(dir / "run"), fs::directory_iterator(), [](const fs::directory_entry& e) {
    return e.path().filename().string().find(".text.tmp") != std::string::npos;  // the scratch text is gone
  }));
}
