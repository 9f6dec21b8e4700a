// Cloze probes as users write them: a TSV saved on Windows scores as the same file saved on
// Linux, and a probe that cannot be scored is an error naming its line (the scores themselves
// are checked against transformers' model in tests/interop/fill_mask_parity.py).
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <fstream>

#include "app_runner.h"
#include "../data/data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/eval/fill_mask.h"
#include "lmkit/models/registry.h"

using namespace lmkit;

namespace {

std::shared_ptr<models::Model> tiny_bert(int64_t vocab) {
  at::manual_seed(0);
  Json config = load_json_file(test::model_preset("bert-tiny"));
  config["vocab_size"] = vocab;
  return models::create_model(config, "bert-tiny.json", "BertForMaskedLM");
}

}  // namespace

TEST_CASE("cloze: CRLF lines score as LF lines; an empty answer, a too-long template, a header alone or a directory is named", "[eval][cloze]") {
  const auto& f = test::data_fixture("bert");
  auto model = tiny_bert(f.tok->vocab_size());
  test::TempDir dir;
  auto probes = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return dir / name;
  };
  const std::string rows = "The game [MASK] in the city.\tthe\nHe [MASK] to the station.\twent\n";
  const Json lf = eval::cloze_scores(*model, *f.tok, probes("lf.tsv", "template\tanswer\n" + rows), at::kCPU);
  std::string crlf_rows;
  for (char c : rows) crlf_rows += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const Json crlf = eval::cloze_scores(*model, *f.tok, probes("crlf.tsv", "template\tanswer\r\n" + crlf_rows), at::kCPU);
  CHECK(lf["probes"].get<int64_t>() + lf["skipped_multi_piece"].get<int64_t>() == 2);
  CHECK(lf["probes"].get<int64_t>() >= 1);
  CHECK(crlf == lf);
  // A byte-order mark (a Windows editor's) before the header, and gzip: the same figures.
  CHECK(eval::cloze_scores(*model, *f.tok, probes("bom.tsv", "\xEF\xBB\xBFtemplate\tanswer\n" + rows), at::kCPU) == lf);
  REQUIRE(test::run_shell("gzip -c " + (dir / "lf.tsv") + " > " + (dir / "lf.tsv.gz")).code == 0);
  CHECK(eval::cloze_scores(*model, *f.tok, dir / "lf.tsv.gz", at::kCPU) == lf);

  const std::string empty = probes("empty.tsv", "template\tanswer\n" + rows + "The [MASK] is.\t \n");
  CHECK_THROWS_WITH(eval::cloze_scores(*model, *f.tok, empty, at::kCPU), Catch::Equals(empty + ":4: the answer is empty"));
  std::string words;
  for (int i = 0; i < 600; ++i) words += "the ";
  const std::string longer = probes("long.tsv", "template\tanswer\n" + words + "[MASK].\tthe\n");
  CHECK_THROWS_WITH(eval::cloze_scores(*model, *f.tok, longer, at::kCPU),
                    Catch::StartsWith(longer + ":2: ") && Catch::Contains("512"));
  const std::string header = probes("header.tsv", "template\tanswers\n" + rows);
  CHECK_THROWS_WITH(eval::cloze_scores(*model, *f.tok, header, at::kCPU),
                    Catch::Equals(header + ":1: expected the header 'template<TAB>answer'"));
  // Both were "no probe whose answer is one token" and ":1: expected the header".
  const std::string alone = probes("alone.tsv", "template\tanswer\n\n");
  CHECK_THROWS_WITH(eval::cloze_scores(*model, *f.tok, alone, at::kCPU),
                    Catch::Equals(alone + ": no probes (only the header 'template<TAB>answer')"));
  CHECK_THROWS_WITH(eval::cloze_scores(*model, *f.tok, dir.path.string(), at::kCPU),
                    Catch::Equals(dir.path.string() + ": is a directory, not a file"));
}

TEST_CASE("fill-mask: --top-k from 1 to the vocabulary, not clamped to it", "[eval][cloze]") {
  // --top-k 0 printed the prompt alone, and a k past the vocabulary was cut to it without a word.
  const auto& f = test::data_fixture("bert");
  auto model = tiny_bert(f.tok->vocab_size());
  const std::string text = "The game [MASK] in the city.";
  const auto all = eval::fill_mask(*model, *f.tok, text, f.tok->vocab_size(), at::kCPU);
  REQUIRE(all.size() == 1);
  CHECK(static_cast<int64_t>(all[0].size()) == f.tok->vocab_size());
  for (const int64_t k : {int64_t{0}, int64_t{-1}, f.tok->vocab_size() + 1}) {
    CHECK_THROWS_WITH(eval::fill_mask(*model, *f.tok, text, k, at::kCPU),
                      Catch::Equals("--top-k " + std::to_string(k) + ": --fill-mask lists 1 to " +
                                    std::to_string(f.tok->vocab_size()) + " tokens a mask (the model's vocabulary)"));
  }
}
