// In-context evaluation: Python's random draws (the few-shot sampler's), the task
// readers and their errors, and scoring on a small GPT. Parity with
// lm-evaluation-harness itself: tests/interop/icl_parity.py (CTest: icl parity).
#include <catch2/catch.hpp>

#include <fstream>

#include "app_runner.h"
#include "../data/data_fixture.h"
#include "lmkit/core/error.h"
#include "lmkit/eval/in_context.h"
#include "lmkit/models/registry.h"

using namespace lmkit;

namespace {
std::string icl(const std::string& name) { return test::source_dir() + "/tests/fixtures/icl/" + name; }
}  // namespace

TEST_CASE("in-context: PythonRandom draws what CPython's random.Random draws", "[icl]") {
  // python3 -c "import random; r = random.Random(S); [r.getrandbits(32) ...], r.sample(range(10), 4),
  //             r.sample(range(1000), 7), [r.randrange(7) ...]"
  struct Want {
    uint64_t seed;
    std::vector<uint32_t> bits;
    std::vector<size_t> small, big;
    std::vector<uint64_t> below;
  };
  const Want cases[] = {
      {1234, {4150886329u, 3342196574u, 1892932127u, 501869158u, 32175636u}, {1, 0, 9, 8},
       {784, 363, 242, 17, 31, 807, 16}, {2, 5, 4, 3, 4}},
      {1099511627783ull, {2635837658u, 3209733218u, 3500038837u, 4028389051u, 4058793509u}, {9, 7, 4, 8},
       {129, 529, 384, 533, 737, 371, 402}, {3, 3, 6, 2, 1}},
  };
  for (const auto& w : cases) {
    INFO("seed " << w.seed);
    eval::PythonRandom r(w.seed);
    for (const uint32_t b : w.bits) CHECK(r.getrandbits(32) == b);
    CHECK(r.sample(10, 4) == w.small);  // the pool method (n <= setsize)
    CHECK(r.sample(1000, 7) == w.big);  // the set method
    for (const uint64_t b : w.below) CHECK(r.randbelow(7) == b);
  }
}

TEST_CASE("in-context: the four layouts read, and bad lines are named", "[icl]") {
  const auto mc = eval::read_icl_task(icl("multiple_choice.jsonl"));
  CHECK(mc.format == eval::IclFormat::kMultipleChoice);
  CHECK(mc.name == "multiple_choice");
  CHECK(mc.examples.size() == 24);
  CHECK(eval::read_icl_task(icl("schema.jsonl")).examples[0].contexts.size() == 2);
  const auto lambada = eval::read_icl_task(icl("lambada.jsonl"));
  CHECK(lambada.format == eval::IclFormat::kCompletion);
  CHECK(lambada.examples[0].continuations[0].find(' ') == std::string::npos);  // the last word alone
  test::TempDir dir;
  // A gzip-compressed task file reads as the plain one (its bytes were parsed as JSON: "malformed").
  REQUIRE(test::run_shell("gzip -c " + icl("multiple_choice.jsonl") + " > " + (dir / "multiple_choice.jsonl.gz")).code == 0);
  const auto gz = eval::read_icl_task(dir / "multiple_choice.jsonl.gz");
  CHECK(gz.name == "multiple_choice");
  REQUIRE(gz.examples.size() == mc.examples.size());
  CHECK(gz.examples.back().source == mc.examples.back().source);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"query": "q", "choices": ["a", "b"]})", ":1: missing field 'gold'"},
      {R"({"query": "q", "choices": ["a", "b"], "gold": 2})", ":1: gold 2 is outside the 2 options"},
      {R"({"query": "q", "choices": [], "gold": 0})", ":1: field 'choices' must be a non-empty list"},
      {R"({"query": "q", "choices": ["a", 3], "gold": 0})", ":1: field 'choices' holds 3"},
      {R"({"query": "q", "choices": ["a", "b"], "gold": 0})" "\n" R"({"context": "c", "continuation": "d"})",
       ":2: an example of another format"},
      {R"({"query": "q", "choices": ["a"], "gold": 0})", ":1: 'choices' needs at least two options"},
      {R"({"context_options": ["a"], "continuation": "c", "gold": 0})", ":1: 'context_options' needs at least two options"},
      {R"({"question": "q"})", ":1: not an in-context example"},
      {R"({"text": "oneword"})", ":1: 'text' has no space"},
  };
  for (const auto& [line, message] : bad) {
    { std::ofstream(dir / "t.jsonl") << line << "\n"; }
    INFO(line);
    CHECK_THROWS_WITH(eval::read_icl_task(dir / "t.jsonl"), Catch::Contains(message));
  }
}

TEST_CASE("in-context: a GPT scores every choice, and shots and truncation are counted", "[icl]") {
  const auto& f = test::data_fixture("gpt2");
  torch::manual_seed(0);
  auto model = models::create_model({{"model_type", "gpt2"}, {"vocab_size", f.tok->vocab_size()}, {"n_embd", 32},
                                     {"n_layer", 2}, {"n_head", 2}, {"n_positions", 32}},
                                    "test");
  const auto task = eval::read_icl_task(icl("multiple_choice.jsonl"));
  eval::IclOptions o;
  o.batch_size = 5;
  std::vector<eval::IclScore> scores;
  const Json r = eval::evaluate_in_context(*model, *f.tok, task, o, c10::Device("cpu"), &scores);
  REQUIRE(scores.size() == 24);
  CHECK(scores[2].loglikelihoods.size() == task.examples[2].continuations.size());
  for (const double ll : scores[0].loglikelihoods) CHECK(ll < 0);
  CHECK(r["examples"] == 24);
  CHECK(r["truncated"] == 0);
  // The same scores in batches of one (padding changes nothing).
  o.batch_size = 1;
  std::vector<eval::IclScore> single;
  eval::evaluate_in_context(*model, *f.tok, task, o, c10::Device("cpu"), &single);
  for (size_t i = 0; i < 24; ++i) {
    for (size_t c = 0; c < single[i].loglikelihoods.size(); ++c) {
      CHECK(single[i].loglikelihoods[c] == Approx(scores[i].loglikelihoods[c]).margin(1e-4));
    }
  }
  // Every choice reading its own context gives the same scores as one pass through the KV cache.
  CHECK(r["shared_contexts"].get<int64_t>() > 10);
  o.share_context = false;
  std::vector<eval::IclScore> unshared;
  const Json plain = eval::evaluate_in_context(*model, *f.tok, task, o, c10::Device("cpu"), &unshared);
  CHECK(plain["shared_contexts"] == 0);
  for (size_t i = 0; i < 24; ++i) {
    CHECK(unshared[i].greedy == scores[i].greedy);
    CHECK(unshared[i].tokens == scores[i].tokens);
    for (size_t c = 0; c < unshared[i].loglikelihoods.size(); ++c) {
      CHECK(unshared[i].loglikelihoods[c] == Approx(scores[i].loglikelihoods[c]).margin(1e-5));
    }
  }
  o.share_context = true;
  // Five shots overflow 32 positions: contexts keep their last tokens and are counted.
  o.shots = 5;
  const Json five = eval::evaluate_in_context(*model, *f.tok, task, o, c10::Device("cpu"));
  CHECK(five["shots"] == 5);
  CHECK(five["truncated"].get<int64_t>() > 0);
  o.shots = 24;
  CHECK_THROWS_WITH(eval::evaluate_in_context(*model, *f.tok, task, o, c10::Device("cpu")),
                    Catch::Contains("24 shots need more than 24 examples"));
}
