// Extractive question answering: SQuAD's reading, HF run_qa's windows, the answers from
// logits, and SQuAD's official figures (tests/interop/squad_cases.py's port of both scripts).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "../data/data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/squad.h"
#include "lmkit/eval/squad.h"
#include "test_util.h"

using namespace lmkit;

namespace {

std::string write_squad(const test::TempDir& dir, const std::string& name, const Json& data) {
  const std::string path = dir / name;
  std::ofstream(path) << Json{{"version", "v2.0"}, {"data", data}}.dump();
  return path;
}

Json one_paragraph(const std::string& context, const Json& qas) {
  return Json::array({{{"title", "t"}, {"paragraphs", Json::array({{{"context", context}, {"qas", qas}}})}}});
}

}  // namespace

TEST_CASE("squad: every case's figures equal SQuAD's official v1.1 and v2.0 scripts", "[squad]") {
  const char* env = std::getenv("LMKIT_SQUAD_CASES");
  const std::string path = env ? env : test::source_dir() + "/tests/fixtures/squad/cases.json";
  const Json cases = load_json_file(path);
  REQUIRE(cases.size() >= 20);
  test::TempDir dir;
  int v1_sets = 0, negatives = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(path << " set " << i);
    const Json& c = cases[i];
    const data::SquadSet set = data::read_squad(write_squad(dir, "set.json", c["data"]));
    const auto answers = c["predictions"].get<std::map<std::string, std::string>>();
    negatives += set.with_negative;
    const Json v2 = eval::squad_scores(set, answers, true);
    for (const auto& [key, want] : c["v2"].items()) {
      INFO("v2 " << key);
      REQUIRE(v2.contains(key));
      CHECK(v2[key].get<double>() == Approx(want.get<double>()).margin(1e-9));
    }
    CHECK(v2.size() == c["v2"].size());
    if (c["v1"].is_null()) continue;
    ++v1_sets;
    const Json v1 = eval::squad_scores(set, answers, false);
    CHECK(v1["exact_match"].get<double>() == Approx(c["v1"]["exact_match"].get<double>()).margin(1e-9));
    CHECK(v1["f1"].get<double>() == Approx(c["v1"]["f1"].get<double>()).margin(1e-9));
  }
  CHECK(v1_sets >= 10);
  CHECK(negatives >= 5);
}

TEST_CASE("squad: answer_start counts characters, and a bad file is named by its question", "[squad]") {
  test::TempDir dir;
  const std::string context = "Zürich café opened in 1984 .";
  const auto set = data::read_squad(write_squad(
      dir, "ok.json", one_paragraph(context, Json::array({{{"id", "a"}, {"question", "when ?"}, {"answers", {{{"text", "1984"}, {"answer_start", 22}}}}}}))));
  REQUIRE(set.questions.size() == 1);
  CHECK(context.substr(static_cast<size_t>(set.questions[0].answers[0].start), 4) == "1984");  // byte 24: two 2-byte letters before
  CHECK(set.words[0].begin.size() == 6);
  auto bad = [&](const Json& qas, const std::string& message) {
    CHECK_THROWS_WITH(data::read_squad(write_squad(dir, "bad.json", one_paragraph(context, qas))), Catch::Contains(message));
  };
  bad(Json::array({{{"id", "a"}, {"question", "q"}, {"answers", {{{"text", "1985"}, {"answer_start", 22}}}}}}),
      "question 'a': answer '1985' is not at character 22 of its context");
  bad(Json::array({{{"id", "a"}, {"question", "q"}, {"answers", {{{"text", "1984"}, {"answer_start", 99}}}}}}),
      "answer_start 99 is not a character of its context");
  bad(Json::array({{{"id", "a"}, {"question", "q"}, {"answers", Json::array()}}}), "question 'a': no answers, and it is not is_impossible");
  bad(Json::array({{{"id", "a"}, {"question", "q"}, {"answers", Json::array()}, {"is_impossible", true}},
                   {{"id", "a"}, {"question", "q"}, {"answers", Json::array()}, {"is_impossible", true}}}),
      "question 'a' appears twice");
  bad(Json::array({{{"id", "a"}, {"answers", Json::array()}}}), "no \"question\"");
  std::ofstream(dir / "text.json") << "not json";
  CHECK_THROWS_WITH(data::read_squad(dir / "text.json"), Catch::Contains("not SQuAD's JSON"));
}

TEST_CASE("squad: windows overlap by doc_stride, cover the context, and place the answer or [CLS]", "[squad]") {
  for (const std::string family : {"bert", "gpt2"}) {
    INFO(family);
    const auto& tok = *test::data_fixture(family).tok;
    test::TempDir dir;
    std::string context;
    for (int i = 0; i < 60; ++i) context += "word" + std::to_string(i) + " filler text ";
    const std::string answer = "word37 filler";
    const int64_t start = static_cast<int64_t>(context.find(answer));
    const auto path = write_squad(dir, "long.json", one_paragraph(context, Json::array({
        {{"id", "q"}, {"question", "  where is word37 ?"}, {"answers", {{{"text", answer}, {"answer_start", start}}}}},
        {{"id", "n"}, {"question", "nothing ?"}, {"answers", Json::array()}, {"is_impossible", true}}})));
    data::QaOptions o;
    o.max_length = 48, o.doc_stride = 16, o.training = true;
    const data::QuestionAnsweringDataset ds(data::read_squad(path), tok, o);
    const auto& f = ds.features();
    REQUIRE(f.size() > 4);
    int64_t found = 0;
    std::vector<int> seen(ds.set().words[0].begin.size(), 0);
    for (size_t i = 0; i < f.size(); ++i) {
      CHECK(static_cast<int64_t>(f[i].input_ids.size()) <= o.max_length);
      CHECK(f[i].word.size() == f[i].input_ids.size());
      for (int32_t w : f[i].word) if (w >= 0) seen[static_cast<size_t>(w)] = 1;
      const data::Example e = ds.get(static_cast<int64_t>(i), 0);
      REQUIRE(e.row_labels.size() == 2);
      if (f[i].start == 0) {
        CHECK(f[i].end == 0);
        continue;
      }
      ++found;
      CHECK(f[static_cast<size_t>(i)].question == 0);
      const auto& words = ds.set().words[0];
      const int32_t a = f[i].word[static_cast<size_t>(f[i].start)], b = f[i].word[static_cast<size_t>(f[i].end)];
      CHECK(context.substr(static_cast<size_t>(words.begin[a]), static_cast<size_t>(words.end[b] - words.begin[a])) == answer);
    }
    CHECK(found >= 1);
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
    // Consecutive windows of one question share doc_stride context tokens.
    auto context_tokens = [](const data::QaFeature& x) { return std::count_if(x.word.begin(), x.word.end(), [](int32_t w) { return w >= 0; }); };
    CHECK(context_tokens(f[0]) > o.doc_stride);
    auto context_words = [](const data::QaFeature& x) {
      std::vector<int32_t> w;
      for (int32_t k : x.word) if (k >= 0) w.push_back(k);
      return w;
    };
    REQUIRE(f[1].question == 0);
    const auto first = context_words(f[0]), second = context_words(f[1]);
    CHECK(std::vector<int32_t>(first.end() - o.doc_stride, first.end()) ==
          std::vector<int32_t>(second.begin(), second.begin() + o.doc_stride));
    // The answers from logits that point at the answer's tokens in one window, and at [CLS] elsewhere.
    std::vector<std::vector<float>> s, e;
    for (const auto& x : f) {
      s.emplace_back(x.input_ids.size(), 0.0f), e.emplace_back(x.input_ids.size(), 0.0f);
      if (x.start > 0) s.back()[static_cast<size_t>(x.start)] = 5, e.back()[static_cast<size_t>(x.end)] = 5;
      else s.back()[0] = x.question == 1 ? 9.0f : 1.0f, e.back()[0] = x.question == 1 ? 9.0f : 1.0f;
    }
    eval::AnswerOptions ao;
    ao.with_negative = true;
    const auto answers = eval::best_answers(ds, s, e, ao);
    REQUIRE(answers.size() == 2);
    CHECK(answers[0].text == answer);
    CHECK(answers[1].text.empty());
    ao.with_negative = false;
    CHECK(eval::best_answers(ds, s, e, ao)[1].text != "");
    // A stride that leaves no step forward is refused by name.
    o.doc_stride = 40;
    CHECK_THROWS_WITH(data::QuestionAnsweringDataset(data::read_squad(path), tok, o), Catch::Contains("--doc-stride 40 must be below"));
  }
}
