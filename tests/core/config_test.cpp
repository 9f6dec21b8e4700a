#include <catch2/catch.hpp>

#include <fstream>

#include "lmkit/core/config.h"
#include "test_util.h"

using lmkit::ConfigReader;
using lmkit::Error;
using lmkit::Json;

namespace {

struct Toy {
  int64_t hidden_size = 8;
  double dropout = 0.1;
  std::string act = "gelu";
  bool tie = true;
  std::vector<int64_t> sizes{1, 2};

  static Toy load(const Json& j, const std::string& file) {
    Toy t;
    ConfigReader r(j, file);
    r.get("hidden_size", t.hidden_size, int64_t{1});
    r.get("dropout", t.dropout, 0.0, 1.0);
    r.get_choice("act", t.act, {"gelu", "relu"});
    r.get("tie", t.tie);
    r.get("sizes", t.sizes);
    r.finish();
    return t;
  }
  Json save() const { return {{"hidden_size", hidden_size}, {"dropout", dropout}, {"act", act}, {"tie", tie}, {"sizes", sizes}}; }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == lmkit::ExitCode::kInput);
    return e.what();
  }
  FAIL("no lmkit::Error thrown");
  return "";
}

}  // namespace

TEST_CASE("config: a misspelt key is rejected naming its file and a suggestion", "[core][config]") {
  Json j = {{"hiden_size", 16}};
  std::string msg = message_of([&] { Toy::load(j, "run.json"); });
  CHECK_THAT(msg, Catch::Contains("run.json"));
  CHECK_THAT(msg, Catch::Contains("unknown key 'hiden_size'"));
  CHECK_THAT(msg, Catch::Contains("did you mean 'hidden_size'"));
}

TEST_CASE("config: nested keys are reported with their path", "[core][config]") {
  Json j = {{"model", {{"layers", 2}, {"layrs", 3}}}};
  std::string msg = message_of([&] {
    ConfigReader r(j, "c.json");
    auto m = r.child("model");
    int layers = 0;
    m.get("layers", layers);
    m.finish();
  });
  CHECK_THAT(msg, Catch::Contains("'model.layrs'"));
}

TEST_CASE("config: wrong types and out-of-range values name the key", "[core][config]") {
  CHECK_THAT(message_of([] { Toy::load({{"hidden_size", "big"}}, "a.json"); }),
             Catch::Contains("'hidden_size' must be an integer"));
  CHECK_THAT(message_of([] { Toy::load({{"hidden_size", 1.5}}, "a.json"); }),
             Catch::Contains("'hidden_size' must be an integer"));
  CHECK_THAT(message_of([] { Toy::load({{"hidden_size", 0}}, "a.json"); }), Catch::Contains("'hidden_size' must be >= 1"));
  CHECK_THAT(message_of([] { Toy::load({{"dropout", 1.5}}, "a.json"); }), Catch::Contains("'dropout' must be in [0"));
  CHECK_THAT(message_of([] { Toy::load({{"act", "swish"}}, "a.json"); }), Catch::Contains("must be one of {gelu, relu}"));
  CHECK_THAT(message_of([] { Toy::load({{"tie", 1}}, "a.json"); }), Catch::Contains("'tie' must be true or false"));
  CHECK_THAT(message_of([] { Toy::load(Json::array(), "a.json"); }), Catch::Contains("must be a JSON object"));
}

TEST_CASE("config: required keys", "[core][config]") {
  Json j = Json::object();
  ConfigReader r(j, "x.json");
  std::string type;
  CHECK_THROWS_WITH(r.require("model_type", type), Catch::Contains("'model_type' is required"));
}

TEST_CASE("config: load -> save -> load gives the same object", "[core][config]") {
  lmkit::test::TempDir dir;
  Toy a;
  a.hidden_size = 32, a.dropout = 0.25, a.act = "relu", a.tie = false, a.sizes = {4, 5, 6};
  lmkit::save_json_file(dir / "a.json", a.save());
  Toy b = Toy::load(lmkit::load_json_file(dir / "a.json"), "a.json");
  CHECK(b.save() == a.save());
  lmkit::save_json_file(dir / "b.json", b.save());
  CHECK(lmkit::load_json_file(dir / "b.json") == lmkit::load_json_file(dir / "a.json"));
}

TEST_CASE("config: malformed JSON names the file and line - a missing file is an input error", "[core][config]") {
  lmkit::test::TempDir dir;
  {
    std::ofstream(dir / "bad.json") << "{\n  \"a\": 1,\n  \"b\": \n}\n";
  }
  std::string msg = message_of([&] { lmkit::load_json_file(dir / "bad.json"); });
  CHECK_THAT(msg, Catch::Contains("bad.json:4"));
  CHECK_THAT(msg, Catch::Contains("malformed JSON"));
  CHECK_THAT(message_of([&] { lmkit::load_json_file(dir / "nope.json"); }), Catch::Contains("cannot open"));
}

TEST_CASE("config: deeply nested JSON and huge values give one short error, not a stack overflow", "[core][config]") {
  // 100,000 levels (200 KB) crashed lmkit-info, lmkit-bench and lmkit-forward with SIGSEGV:
  // nlohmann's dump() recursed while building the error message.
  lmkit::test::TempDir dir;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  { std::ofstream(dir / "deep.json") << "{\n\"model_type\": " << deep << "}\n"; }
  const std::string msg = message_of([&] { lmkit::load_json_file(dir / "deep.json"); });
  CHECK_THAT(msg, Catch::Contains("deep.json:2: JSON nested deeper than 512 levels"));
  CHECK(msg.size() < 300);
  // Brackets inside strings are text, not nesting; 512 levels still parse.
  CHECK(lmkit::parse_json("{\"a\": \"" + std::string(2000, '[') + "\"}", "s")["a"].get<std::string>().size() == 2000);
  CHECK_NOTHROW(lmkit::parse_json(std::string(512, '[') + std::string(512, ']'), "ok"));
  // A key twice in one object is refused; the same key in two objects is not.
  CHECK_THAT(message_of([] { lmkit::parse_json(R"({"a": {"x": 1}, "b": {"x": 2, "y": 3, "x": 4}})", "dup.json"); }),
             Catch::Contains("dup.json: key 'x' appears twice in one object"));
  CHECK_THROWS(lmkit::parse_json(std::string(513, '[') + std::string(513, ']'), "too deep"));
  // A wrong value of 10 MB is named briefly.
  Json j = {{"hidden_size", std::string(10'000'000, 'x')}};
  int64_t h = 0;
  const std::string wrong = message_of([&] { ConfigReader(j, "big.json").get("hidden_size", h); });
  CHECK_THAT(wrong, Catch::Contains("must be an integer"));
  CHECK(wrong.size() < 300);
  CHECK(lmkit::brief_json(Json::array({1, 2, 3, 4, 5, 6, 7, 8, 9})) == "an array of 9 items");
  // A number beyond a double (1e400): an input error with its line, not nlohmann's out_of_range.
  const std::string overflow = message_of([] { lmkit::parse_json("{\n\"eps\": 1e400}", "c.json"); });
  CHECK_THAT(overflow, Catch::StartsWith("c.json:2: number overflow parsing '1e400'"));
  CHECK_THROWS_AS(lmkit::parse_json("[-1e400]", "c.json"), lmkit::Error);
}

TEST_CASE("config: atomic writes leave no temporary file behind", "[core][config]") {
  lmkit::test::TempDir dir;
  lmkit::save_json_file(dir / "c.json", {{"x", 1}});
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);
  CHECK(lmkit::load_json_file(dir / "c.json")["x"] == 1);
}
