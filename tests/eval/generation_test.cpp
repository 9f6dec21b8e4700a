#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/eval/generation.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/registry.h"
#include "test_util.h"

using namespace lmkit;

namespace {

at::Tensor to_tensor(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<at::Tensor> t;
  for (const auto& r : rows) t.push_back(at::tensor(r, at::kLong));
  return at::stack(t);
}

eval::GenerationOptions fixed_length(int64_t n) {
  eval::GenerationOptions o;
  o.max_new_tokens = n;
  o.stop_at_eos = false;  // the fixtures generate exactly n tokens
  return o;
}

std::shared_ptr<models::Model> tiny_transformer() {
  at::manual_seed(3);
  return models::create_model({{"model_type", "transformer"}, {"vocab_size", 40}, {"d_model", 16}, {"encoder_layers", 2},
                               {"decoder_layers", 2}, {"num_heads", 2}, {"d_ff", 32}, {"max_position_embeddings", 64}},
                              "tiny.json");
}

// Sum of log p(token) of a GPT continuation under a full forward pass.
double gpt_logprob(models::Model& model, const at::Tensor& prompt, const std::vector<int64_t>& continuation) {
  at::NoGradGuard ng;
  at::Tensor seq = at::cat({prompt, at::tensor(continuation, at::kLong).unsqueeze(0)}, 1);
  Batch b;
  b.input_ids = seq;
  at::Tensor logp = model.forward(b).logits.log_softmax(-1)[0];  // (T, V)
  double total = 0;
  for (size_t i = 0; i < continuation.size(); ++i) {
    total += logp[prompt.size(1) - 1 + static_cast<int64_t>(i)][continuation[i]].item<double>();
  }
  return total;
}

}  // namespace

TEST_CASE("generation: GPT-2 greedy tokens and step logits equal HF generate()", "[eval][generation]") {
  auto model = models::load_pretrained(test::hf_fixture("gpt2"));
  const auto in = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors"));
  const auto want = io::read_safetensors(test::hf_fixture("gpt2/expected.safetensors"));
  const at::Tensor prompt = in.at("gen_input_ids", "gpt2");
  auto out = eval::generate(*model, prompt, {}, fixed_length(8));
  CHECK(at::equal(to_tensor(out), want.at("gen_sequences", "gpt2").slice(1, prompt.size(1))));

  // Step-by-step logits from the cache equal HF's gen_scores.
  model->eval();
  at::NoGradGuard ng;
  auto session = model->start_decoding(prompt, {}, true);
  at::Tensor tokens = prompt, scores = want.at("gen_scores", "gpt2");
  for (int64_t t = 0; t < 8; ++t) {
    at::Tensor logits = session->step(tokens);
    CHECK(test::max_abs_diff(logits, scores.select(1, t)) < 1e-4);
    tokens = logits.argmax(-1, true);
  }
}

TEST_CASE("generation: T5 greedy tokens equal HF generate() (padded encoder inputs)", "[eval][generation]") {
  for (const std::string name : {"t5_relu", "t5_gated_gelu"}) {
    INFO(name);
    auto model = models::load_pretrained(test::hf_fixture(name));
    const auto in = io::read_safetensors(test::hf_fixture(name + "/inputs.safetensors"));
    const auto want = io::read_safetensors(test::hf_fixture(name + "/expected.safetensors"));
    auto out = eval::generate(*model, in.at("input_ids", name), in.at("attention_mask", name), fixed_length(8));
    CHECK(at::equal(to_tensor(out), want.at("gen_sequences", name).slice(1, 1)));
  }
}

TEST_CASE("generation: cached and uncached decoding agree", "[eval][generation]") {
  auto gpt = models::load_pretrained(test::hf_fixture("gpt2"));
  auto t5 = models::load_pretrained(test::hf_fixture("t5_gated_gelu"));
  auto transformer = tiny_transformer();
  const at::Tensor gpt_prompt = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors")).at("gen_input_ids", "gpt2");
  const auto t5_in = io::read_safetensors(test::hf_fixture("t5_gated_gelu/inputs.safetensors"));
  const at::Tensor src = at::randint(3, 40, {2, 7}, at::kLong);
  struct Case {
    models::Model* model;
    at::Tensor ids, mask;
  } cases[] = {{gpt.get(), gpt_prompt, {}},
               {t5.get(), t5_in.at("input_ids", "t5"), t5_in.at("attention_mask", "t5")},
               {transformer.get(), src, at::ones_like(src)}};
  for (auto& c : cases) {
    INFO(c.model->architecture());
    c.model->eval();
    at::NoGradGuard ng;
    auto cached = c.model->start_decoding(c.ids, c.mask, true);
    auto uncached = c.model->start_decoding(c.ids, c.mask, false);
    const auto spec = c.model->generation_spec();
    at::Tensor tokens = spec.encoder_decoder ? at::full({c.ids.size(0), 1}, spec.decoder_start_token_id, at::kLong) : c.ids;
    for (int t = 0; t < 10; ++t) {
      at::Tensor a = cached->step(tokens), b = uncached->step(tokens);
      CHECK(test::max_abs_diff(a, b) < 1e-4);
      tokens = a.argmax(-1, true);
    }
    eval::GenerationOptions o = fixed_length(10);
    auto with = eval::generate(*c.model, c.ids, c.mask, o);
    o.use_cache = false;
    CHECK(eval::generate(*c.model, c.ids, c.mask, o) == with);
  }
}

TEST_CASE("generation: beam search with one beam equals greedy - wider beams score at least as well",
          "[eval][generation]") {
  auto gpt = models::load_pretrained(test::hf_fixture("gpt2"));
  gpt->eval();
  const at::Tensor prompt = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors")).at("gen_input_ids", "gpt2");
  eval::GenerationOptions o = fixed_length(8);
  const auto greedy = eval::generate(*gpt, prompt, {}, o);
  o.search = eval::Search::kBeam;
  o.num_beams = 1;
  CHECK(eval::generate(*gpt, prompt, {}, o) == greedy);
  o.num_beams = 4;
  o.length_penalty = 0.0;  // fixed length: compare raw log-probabilities
  const auto beam = eval::generate(*gpt, prompt, {}, o);
  for (int64_t i = 0; i < prompt.size(0); ++i) {
    REQUIRE(beam[i].size() == 8);
    CHECK(gpt_logprob(*gpt, prompt.slice(0, i, i + 1), beam[i]) >=
          gpt_logprob(*gpt, prompt.slice(0, i, i + 1), greedy[i]) - 1e-4);
  }
  // T5, padded encoder inputs, beams and EOS stopping.
  auto t5 = models::load_pretrained(test::hf_fixture("t5_relu"));
  const auto in = io::read_safetensors(test::hf_fixture("t5_relu/inputs.safetensors"));
  o.stop_at_eos = true;
  o.length_penalty = 1.0;
  o.num_beams = 1;
  eval::GenerationOptions g = o;
  g.search = eval::Search::kGreedy;
  CHECK(eval::generate(*t5, in.at("input_ids", "t5"), in.at("attention_mask", "t5"), o) ==
        eval::generate(*t5, in.at("input_ids", "t5"), in.at("attention_mask", "t5"), g));
}

TEST_CASE("generation: sampling is seeded - top-k 1 is greedy - EOS stops a row", "[eval][generation]") {
  auto gpt = models::load_pretrained(test::hf_fixture("gpt2"));
  const at::Tensor prompt = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors")).at("gen_input_ids", "gpt2");
  eval::GenerationOptions o = fixed_length(12);
  o.search = eval::Search::kSample;
  o.seed = 11;
  const auto a = eval::generate(*gpt, prompt, {}, o);
  CHECK(eval::generate(*gpt, prompt, {}, o) == a);
  o.seed = 12;
  CHECK(eval::generate(*gpt, prompt, {}, o) != a);
  o.top_k = 1;
  CHECK(eval::generate(*gpt, prompt, {}, o) == eval::generate(*gpt, prompt, {}, fixed_length(12)));

  // HF's fixture: row 1 emits EOS (999) as its 6th token; with stopping on, it ends there.
  eval::GenerationOptions stop = fixed_length(8);
  stop.stop_at_eos = true;
  auto out = eval::generate(*gpt, prompt, {}, stop);
  REQUIRE(out[1].size() == 6);
  CHECK(out[1].back() == 999);
  CHECK(out[0].size() == 8);
}

TEST_CASE("generation: top-k and top-p filtering", "[eval][generation]") {
  at::Tensor logits = at::log(at::tensor({0.5f, 0.3f, 0.15f, 0.05f})).unsqueeze(0);
  auto kept = [](const at::Tensor& t) { return at::isfinite(t).sum().item<int64_t>(); };
  CHECK(kept(eval::filter_logits(logits, 2, 1.0)) == 2);
  CHECK(kept(eval::filter_logits(logits, 0, 0.7)) == 2);   // 0.5 + 0.3 >= 0.7
  CHECK(kept(eval::filter_logits(logits, 0, 0.9)) == 3);   // needs 0.15 too
  CHECK(kept(eval::filter_logits(logits, 0, 0.01)) == 1);  // the top token always stays
  CHECK(std::isfinite(eval::filter_logits(logits, 0, 0.01)[0][0].item<float>()));
}

TEST_CASE("generation: bad requests are input errors", "[eval][generation]") {
  auto gpt = models::load_pretrained(test::hf_fixture("gpt2"));
  CHECK_THROWS_WITH(eval::generate(*gpt, at::tensor({1, 2000}, at::kLong).view({1, 2}), {}, fixed_length(2)),
                    Catch::Contains("prompt holds id 2000 outside [0, 1000)"));
  CHECK_THROWS_WITH(eval::generate(*gpt, at::tensor({1, 2}, at::kLong).view({1, 2}), at::tensor({1, 0}, at::kLong).view({1, 2}), fixed_length(2)),
                    Catch::Contains("unpadded"));
  auto cls = models::load_pretrained(test::hf_fixture("bert_seqcls"));
  CHECK_THROWS_WITH(eval::generate(*cls, at::tensor({1, 2}, at::kLong).view({1, 2}), {}, fixed_length(2)),
                    Catch::Contains("cannot generate"));
}

TEST_CASE("generation: more new tokens than the positions allow is refused before the first", "[eval][generation]") {
  // It used to generate every token that fitted and then fail.
  auto gpt = models::load_pretrained(test::hf_fixture("gpt2"));
  const int64_t positions = gpt->config_json()["n_positions"].get<int64_t>();
  const at::Tensor prompt = at::randint(0, 50, {1, 5}, at::kLong);
  eval::GenerationOptions o;
  o.max_new_tokens = positions - 5 + 1;  // the last token is never fed back: exactly fits
  CHECK(eval::generate(*gpt, prompt, {}, o).front().size() >= 1);
  o.max_new_tokens = positions - 5 + 2;
  CHECK_THROWS_WITH(eval::generate(*gpt, prompt, {}, o),
                    Catch::Contains("does not fit the model's " + std::to_string(positions) + " positions after a prompt of 5 tokens") &&
                        Catch::Contains("at most " + std::to_string(positions - 4)));
  auto transformer = tiny_transformer();
  const int64_t decoder = transformer->config_json()["max_position_embeddings"].get<int64_t>();
  const at::Tensor src = at::randint(3, 40, {1, 4}, at::kLong);
  o.max_new_tokens = decoder + 1;
  CHECK_THROWS_WITH(eval::generate(*transformer, src, at::ones_like(src), o), Catch::Contains("(at most " + std::to_string(decoder) + ")"));
}
