// End to end: lmkit-forward, lmkit-generate and lmkit-info run as a user runs them.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "lmkit/io/safetensors.h"
#include "app_runner.h"
#include "test_util.h"

using namespace lmkit;
using lmkit::test::Run;
using lmkit::test::run;

TEST_CASE("apps: lmkit-forward reproduces HF's outputs from a safetensors input file", "[apps]") {
  test::TempDir dir;
  const auto in = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors"));
  io::write_safetensors(dir / "in.safetensors", {{"input_ids", in.get("input_ids")},
                                                 {"attention_mask", in.get("attention_mask")},
                                                 {"labels", in.get("labels")}});
  Run r = run("lmkit-forward --checkpoint " + test::hf_fixture("gpt2") + " --inputs " + (dir / "in.safetensors") + " --output " +
              (dir / "out.safetensors") + " --hidden-states --threads 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto out = io::read_safetensors(dir / "out.safetensors");
  const auto want = io::read_safetensors(test::hf_fixture("gpt2/expected.safetensors"));
  CHECK(test::max_abs_diff(out.at("logits", "out"), want.at("logits", "want")) < 1e-4);
  CHECK(test::max_abs_diff(out.at("loss", "out"), want.at("loss", "want")) < 1e-5);
  CHECK(test::max_abs_diff(out.at("hidden_states.1", "out"), want.at("hidden_states.1", "want")) < 1e-4);
}

TEST_CASE("apps: lmkit-forward refuses bad inputs with one error line and exit 2", "[apps]") {
  test::TempDir dir;
  io::write_safetensors(dir / "oov.safetensors", {{"input_ids", at::full({1, 4}, 5000, at::kLong)}});
  io::write_safetensors(dir / "typo.safetensors", {{"input_id", at::ones({1, 4}, at::kLong)}});
  io::write_safetensors(dir / "types.safetensors",
                        {{"input_ids", at::ones({1, 4}, at::kLong)}, {"token_type_ids", at::zeros({1, 4}, at::kLong)}});
  const std::string base = "lmkit-forward --checkpoint " + test::hf_fixture("gpt2") + " --output " + (dir / "o.safetensors");
  Run oov = run(base + " --inputs " + (dir / "oov.safetensors"));
  CHECK(oov.code == 2);
  CHECK_THAT(oov.out, Catch::StartsWith("error: ") && Catch::Contains("input_ids holds id 5000 outside [0, 1000)"));
  Run typo = run(base + " --inputs " + (dir / "typo.safetensors"));
  CHECK(typo.code == 2);
  CHECK_THAT(typo.out, Catch::Contains("unknown input tensor 'input_id'"));
  Run types = run(base + " --inputs " + (dir / "types.safetensors"));
  CHECK(types.code == 2);
  CHECK_THAT(types.out, Catch::Contains("GPT2LMHeadModel does not take token_type_ids"));
  // --save: a file in its place, an existing checkpoint without --overwrite; pixel_values to a text model.
  io::write_safetensors(dir / "ok.safetensors", {{"input_ids", at::ones({1, 4}, at::kLong)}});
  const std::string saving = "lmkit-forward --checkpoint " + test::hf_fixture("gpt2") + " --output " + (dir / "s.safetensors");
  Run file = run(saving + " --inputs " + (dir / "ok.safetensors") + " --save " + (dir / "typo.safetensors"));
  CHECK(file.code == 2);
  CHECK_THAT(file.out, Catch::StartsWith("error: --save ") && Catch::Contains("is a file, not a checkpoint directory"));
  REQUIRE(run(saving + " --inputs " + (dir / "ok.safetensors") + " --overwrite --save " + (dir / "saved")).code == 0);
  CHECK(std::filesystem::exists(dir / "saved/model.safetensors"));
  CHECK(run(saving + " --inputs " + (dir / "ok.safetensors") + " --overwrite --save " + (dir / "saved")).code == 0);  // replaced
  Run kept = run("lmkit-forward --checkpoint " + test::hf_fixture("gpt2") + " --output " + (dir / "o3.safetensors") + " --inputs " +
                 (dir / "ok.safetensors") + " --save " + (dir / "saved"));
  CHECK(kept.code == 2);
  CHECK_THAT(kept.out, Catch::Contains("--save " + (dir / "saved") + ": exists; give --overwrite to replace it"));
  io::write_safetensors(dir / "pixels.safetensors", {{"pixel_values", at::zeros({1, 1, 8, 8})}});
  Run pixels = run(saving + " --overwrite --inputs " + (dir / "pixels.safetensors"));
  CHECK(pixels.code == 2);
  CHECK_THAT(pixels.out, Catch::StartsWith("error: ") && Catch::Contains("GPT2LMHeadModel does not take pixel_values"));
  // Ids an embedding cannot take, empty and mis-shaped tensors: named, exit 2 (LibTorch's
  // "Expected tensor for argument #1 'indices'" and "select(): index 0 out of range" were exit 1).
  const std::vector<std::pair<std::vector<std::pair<std::string, at::Tensor>>, std::string>> shaped = {
      {{{"input_ids", at::ones({1, 4}, at::kChar)}}, "input_ids must hold int64 or int32 ids, not Char"},
      {{{"input_ids", at::ones({1, 4}, at::kShort)}}, "not Short"},
      {{{"input_ids", at::ones({1, 4}, at::kByte)}}, "not Byte"},
      {{{"input_ids", at::ones({1, 0}, at::kLong)}}, "input_ids must have shape [batch, length] with batch and length >= 1, got [1, 0]"},
      {{{"input_ids", at::ones({4}, at::kLong)}}, "got [4]"},
      {{{"input_ids", at::ones({1, 4}, at::kLong)}, {"labels", at::ones({1, 4}, at::kInt)}}, "labels must hold int64 ids, not Int"},
      // A mask of 2s was read as 1s (HF would add a large positive bias there).
      {{{"input_ids", at::ones({1, 4}, at::kLong)}, {"attention_mask", at::full({1, 4}, 2, at::kLong)}},
       "attention_mask holds values other than 0 and 1 (1: a token to attend to, 0: padding)"},
      {{{"input_ids", at::ones({1, 4}, at::kLong)}, {"attention_mask", at::full({1, 4}, 0.5, at::kFloat)}},
       "attention_mask holds values other than 0 and 1"},
  };
  for (size_t i = 0; i < shaped.size(); ++i) {
    const std::string file = dir / ("shaped" + std::to_string(i) + ".safetensors");
    io::write_safetensors(file, shaped[i].first);
    Run r = run(base + " --inputs " + file);
    INFO(shaped[i].second << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("error: ") && Catch::Contains(shaped[i].second));
  }
  // BERT's next_sentence_label is one class per row.
  io::write_safetensors(dir / "nsp.safetensors", {{"input_ids", at::ones({1, 4}, at::kLong)},
                                                  {"next_sentence_label", at::zeros({1, 2}, at::kLong)}});
  Run nsp = run("lmkit-forward --checkpoint " + test::hf_fixture("bert") + " --output " + (dir / "o.safetensors") + " --inputs " +
                (dir / "nsp.safetensors"));
  CHECK(nsp.code == 2);
  CHECK_THAT(nsp.out, Catch::Contains("next_sentence_label must have shape [1] (one class per row), got [1, 2]"));
  // T5's decoder side: an empty or differently batched decoder_input_ids.
  for (const auto& [ids, message] : std::vector<std::pair<at::Tensor, std::string>>{
           {at::ones({1, 0}, at::kLong), "decoder_input_ids must have shape [batch, length] with batch and length >= 1, got [1, 0]"},
           {at::ones({2, 3}, at::kLong), "decoder_input_ids must have shape [1, length] (input_ids' batch, length >= 1), got [2, 3]"}}) {
    io::write_safetensors(dir / "t5.safetensors", {{"input_ids", at::ones({1, 4}, at::kLong)}, {"decoder_input_ids", ids}});
    Run t5 = run("lmkit-forward --checkpoint " + test::hf_fixture("t5_relu") + " --output " + (dir / "o.safetensors") +
                 " --inputs " + (dir / "t5.safetensors"));
    INFO(t5.out);
    CHECK(t5.code == 2);
    CHECK_THAT(t5.out, Catch::Contains(message));
  }
  Run missing = run(base + " --inputs " + (dir / "none.safetensors"));
  CHECK(missing.code == 2);
  CHECK_THAT(missing.out, Catch::Contains("cannot open"));
  CHECK_FALSE(std::filesystem::exists(dir / "o.safetensors"));  // no output on failure
}

TEST_CASE("apps: lmkit-generate prints HF's greedy ids and refuses what it cannot do", "[apps]") {
  const auto want = io::read_safetensors(test::hf_fixture("gpt2/expected.safetensors")).at("gen_sequences", "want");
  std::string expected;
  for (int64_t i = 6; i < 14; ++i) expected += (i > 6 ? "," : "") + std::to_string(want[0][i].item<int64_t>());
  const auto prompt = io::read_safetensors(test::hf_fixture("gpt2/inputs.safetensors")).at("gen_input_ids", "in")[0];
  std::string ids;
  for (int64_t i = 0; i < prompt.size(0); ++i) ids += (i ? "," : "") + std::to_string(prompt[i].item<int64_t>());
  Run r = run("lmkit-generate --checkpoint " + test::hf_fixture("gpt2") + " --prompt-ids " + ids + " --max-new-tokens 8 --ids");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out == expected + "\n");
  Run beam = run("lmkit-generate --checkpoint " + test::hf_fixture("gpt2") + " --prompt-ids " + ids + " --max-new-tokens 8 --beams 1 --ids");
  CHECK(beam.out == expected + "\n");
  Run bert = run("lmkit-generate --checkpoint " + test::hf_fixture("bert") + " --prompt-ids 2,3");
  CHECK(bert.code == 2);
  CHECK_THAT(bert.out, Catch::Contains("cannot generate"));
  Run text = run("lmkit-generate --checkpoint " + test::hf_fixture("gpt2") + " --prompt hello");
  CHECK(text.code == 2);
  CHECK_THAT(text.out, Catch::Contains("no tokenizer, so text prompts cannot be encoded"));
}

TEST_CASE("apps: lmkit-generate continues a text prompt with the checkpoint's tokenizer", "[apps]") {
  // A checkpoint with a tokenizer: a two-step GPT pretraining run on the bundled text.
  test::TempDir dir;
  auto pre = run("lmkit-pretrain --model " + test::source_dir() + "/models/gpt-mini.json --train " + test::source_dir() +
                 "/data/wikitext-2-sample/valid.txt --output " + (dir / "gpt") +
                 " --vocab-size 1000 --steps 2 --batch-size 2 --seq-len 16 --threads 1");
  REQUIRE(pre.code == 0);
  Run text = run("lmkit-generate --checkpoint " + (dir / "gpt/final") + " --prompt \"The game\" --max-new-tokens 5");
  INFO(text.out);
  CHECK(text.code == 0);
  CHECK_FALSE(text.out.empty());
  Run ids = run("lmkit-generate --checkpoint " + (dir / "gpt/final") + " --prompt \"The game\" --max-new-tokens 5 --ids");
  CHECK(ids.code == 0);
  // At most five ids (fewer if EOS came first), each an integer within the 1000-token vocabulary.
  std::stringstream in(ids.out.substr(0, ids.out.find('\n')));
  std::string item;
  int count = 0;
  while (std::getline(in, item, ',')) {
    CHECK(std::stoll(item) >= 0);
    CHECK(std::stoll(item) < 1000);
    ++count;
  }
  CHECK(count >= 1);
  CHECK(count <= 5);
}

TEST_CASE("apps: lmkit-info reports the reference parameter counts", "[apps]") {
  Run r = run("lmkit-info " + test::source_dir() + "/models/bert-base.json --architecture BertModel --json");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["model_type"] == "bert");
  CHECK(j["parameters"] == 109482240);
  // The text summary lists each family's sizes under its own names, and no token ids.
  for (const auto& [preset, keys] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"bert-base", {"hidden_size", "num_hidden_layers", "intermediate_size"}},
           {"gpt2-small", {"n_embd", "n_layer", "n_positions"}},
           {"t5-small", {"d_model", "d_kv", "num_heads"}}}) {
    Run text = run("lmkit-info " + test::source_dir() + "/models/" + preset + ".json");
    REQUIRE(text.code == 0);
    for (const auto& key : keys) CHECK_THAT(text.out, Catch::Contains("  " + key + " "));
    CHECK_THAT(text.out, !Catch::Contains("token_id"));
  }
  Run bad = run("lmkit-info " + test::source_dir() + "/models/nope.json");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::StartsWith("error: "));
}

TEST_CASE("apps: lmkit-info --registered lists every kind's entries, each with its line", "[apps]") {
  Run r = run("lmkit-info --registered --json");
  REQUIRE(r.code == 0);
  const auto kinds = nlohmann::json::parse(r.out)["registered"];
  for (const char* kind : {"families", "objectives", "tasks", "metrics", "optimizers", "attentions"}) {
    INFO(kind);
    REQUIRE(kinds.contains(kind));
    CHECK(kinds[kind].size() >= 4);
    for (const auto& e : kinds[kind]) {
      INFO(e.dump());
      CHECK(e["source"] == "lmkit");
      CHECK(e["summary"].get<std::string>().size() >= 12);  // a family's too: what it is, after whom
    }
  }
  Run text = run("lmkit-info --registered");
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("  llama                  Llama (Touvron et al. 2023)"));
}

TEST_CASE("apps: lmkit-info --fields lists each config key with its value, default and check", "[apps]") {
  Run r = run("lmkit-info " + test::source_dir() + "/models/mistral-mini.json --fields");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("config key"));
  // Mistral's own defaults (Mistral-7B's), the preset's changes starred.
  const size_t at = r.out.find("sliding_window", r.out.find("config key"));
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at - 2, r.out.find('\n', at) - at + 2);
  CHECK_THAT(line, Catch::StartsWith("* sliding_window") && Catch::Contains(" 64 ") && Catch::Contains(" 4096 ") &&
                       Catch::EndsWith("integer >= 1 or null"));
  CHECK_THAT(r.out, Catch::Contains("  hidden_act                       \"silu\"         \"silu\"         only \"silu\""));
  Run j = run("lmkit-info " + test::source_dir() + "/models/bert-mini.json --fields --json");
  REQUIRE(j.code == 0);
  const auto fields = nlohmann::json::parse(j.out)["fields"];
  REQUIRE(fields.is_array());
  CHECK(fields[0]["key"] == "vocab_size");
  Run bare = run("lmkit-info --fields");
  CHECK(bare.code == 2);
  CHECK_THAT(bare.out, Catch::StartsWith("error: --fields needs PATH"));
}
