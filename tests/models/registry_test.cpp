#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/bert.h"
#include "lmkit/models/registry.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json preset(const std::string& name) { return load_json_file(test::source_dir() + "/models/" + name + ".json"); }

// A tiny config of each family, for round trips.
std::vector<std::pair<std::string, Json>> tiny_configs() {
  return {
      {"BertForPreTraining", {{"model_type", "bert"}, {"vocab_size", 50}, {"hidden_size", 16}, {"num_hidden_layers", 2},
                              {"num_attention_heads", 2}, {"intermediate_size", 32}, {"max_position_embeddings", 20}}},
      {"BertForSequenceClassification", {{"model_type", "bert"}, {"vocab_size", 50}, {"hidden_size", 16},
                                         {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 32},
                                         {"max_position_embeddings", 20}, {"num_labels", 3}}},
      {"GPT2LMHeadModel", {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 2}, {"n_head", 2},
                           {"n_positions", 20}}},
      {"GPT2ForSequenceClassification", {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 16}, {"n_layer", 1},
                                         {"n_head", 2}, {"n_positions", 20}}},
      {"T5ForConditionalGeneration", {{"model_type", "t5"}, {"vocab_size", 50}, {"d_model", 16}, {"d_kv", 4},
                                      {"d_ff", 32}, {"num_layers", 2}, {"num_heads", 2},
                                      {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"T5EncoderForSequenceClassification", {{"model_type", "t5"}, {"vocab_size", 50}, {"d_model", 16}, {"d_kv", 4},
                                              {"d_ff", 32}, {"num_layers", 1}, {"num_heads", 2}}},
      {"TransformerForSeq2Seq", {{"model_type", "transformer"}, {"vocab_size", 50}, {"d_model", 16},
                                 {"encoder_layers", 1}, {"decoder_layers", 2}, {"num_heads", 2}, {"d_ff", 32},
                                 {"max_position_embeddings", 20}}},
  };
}

}  // namespace

TEST_CASE("registry: parameter counts equal the reference models exactly", "[models][registry]") {
  CHECK(models::count_parameters(*models::create_model(preset("bert-base"), "bert-base.json", "BertModel")) == 109482240);
  CHECK(models::count_parameters(*models::create_model(preset("gpt2-small"), "gpt2-small.json")) == 124439808);
  CHECK(models::count_parameters(*models::create_model(preset("t5-small"), "t5-small.json")) == 60506624);
  CHECK(models::count_parameters(*models::create_model(preset("t5-base"), "t5-base.json")) == 222903552);
}

TEST_CASE("registry: every preset builds and its config round-trips", "[models][registry]") {
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/models")) {
    const std::string path = entry.path().string();
    INFO(path);
    Json j = load_json_file(path);
    auto model = models::create_model(j, path);
    Json saved = model->config_json();
    auto again = models::create_model(saved, "saved");
    CHECK(again->config_json() == saved);
    CHECK(again->architecture() == model->architecture());
    // The preset's own keys survive unchanged.
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (saved.contains(it.key())) CHECK(saved[it.key()] == it.value());
    }
  }
}

TEST_CASE("registry: bad configs are named errors", "[models][registry]") {
  Json j = preset("bert-tiny");
  j["hiden_size"] = 64;
  CHECK_THROWS_WITH(models::create_model(j, "m.json"), Catch::Contains("m.json: unknown key 'hiden_size'"));
  CHECK_THROWS_WITH(models::create_model({{"model_type", "rnn"}}, "m.json"), Catch::Contains("unknown model_type 'rnn'"));
  CHECK_THROWS_WITH(models::create_model({{"hidden_size", 4}}, "m.json"), Catch::Contains("'model_type' is required"));
  CHECK_THROWS_WITH(models::create_model(preset("bert-tiny"), "m.json", "GPT2LMHeadModel"),
                    Catch::Contains("architecture 'GPT2LMHeadModel' is not supported"));
  Json heads = preset("bert-tiny");
  heads["num_attention_heads"] = 3;
  CHECK_THROWS_WITH(models::create_model(heads, "m.json"), Catch::Contains("not divisible"));
  Json negative = preset("gpt-mini");
  negative["n_layer"] = -1;
  CHECK_THROWS_WITH(models::create_model(negative, "m.json"), Catch::Contains("'n_layer' must be >= 0"));
  // Each size in range, the product past any memory: an input error naming the config
  // (it was LibTorch's allocator message, exit 1).
  Json huge = preset("bert-tiny");
  huge["vocab_size"] = int64_t{1000000000000};
  try {
    models::create_model(huge, "m.json");
    FAIL("a 10^12-row embedding was allocated");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kInput);
    CHECK_THAT(e.what(), Catch::StartsWith("m.json: the model it describes does not fit in memory (tried to allocate"));
  }
}

TEST_CASE("registry: export -> import is bitwise identical for every family and head", "[models][registry]") {
  test::TempDir dir;
  at::manual_seed(0);
  for (const auto& [arch, config] : tiny_configs()) {
    INFO(arch);
    auto model = models::create_model(config, "tiny.json", arch);
    models::save_pretrained(*model, dir / arch);
    auto loaded = models::load_pretrained(dir / arch);
    CHECK(loaded->architecture() == arch);
    auto a = models::hf_state_dict(*model), b = models::hf_state_dict(*loaded);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].first == b[i].first);
      CHECK(at::equal(a[i].second, b[i].second));
    }
    // Re-saving the loaded model writes the same bytes.
    models::save_pretrained(*loaded, dir / (arch + "-again"));
    CHECK(read_file(dir / arch + "/model.safetensors") == read_file(dir / (arch + "-again") + "/model.safetensors"));
    // No temporary directories are left behind.
    for (auto& e : std::filesystem::directory_iterator(dir.path)) {
      CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
    }
  }
}

TEST_CASE("registry: a pretrained encoder loads under a new classification head", "[models][registry]") {
  test::TempDir dir;
  auto pretrained = models::create_model(tiny_configs()[0].second, "tiny.json", "BertForPreTraining");
  models::save_pretrained(*pretrained, dir / "pre");
  models::LoadReport report;
  // Refused unless a new head is asked for: it would start at random.
  CHECK_THROWS_WITH(models::load_pretrained(dir / "pre", "BertForSequenceClassification"),
                    Catch::Contains("lacks 2 tensor(s) that BertForSequenceClassification needs (classifier.weight, classifier.bias)"));
  auto cls = models::load_pretrained(dir / "pre", "BertForSequenceClassification", &report, Json::object(), /*new_head=*/true);
  CHECK(report.missing == std::vector<std::string>{"classifier.weight", "classifier.bias"});
  CHECK_FALSE(report.unexpected.empty());  // the MLM and NSP heads are not used
  auto& a = dynamic_cast<models::BertImpl&>(*pretrained);
  auto& b = dynamic_cast<models::BertImpl&>(*cls);
  CHECK(at::equal(a.word_embeddings->weight, b.word_embeddings->weight));
  CHECK(at::equal(a.pooler->weight, b.pooler->weight));
}

TEST_CASE("registry: missing or incomplete or damaged checkpoints are refused", "[models][registry]") {
  test::TempDir dir;
  CHECK_THROWS_WITH(models::load_pretrained(dir / "nope"), Catch::Contains("not a checkpoint directory"));
  auto model = models::create_model(tiny_configs()[2].second, "tiny.json");
  models::save_pretrained(*model, dir / "ck");
  const std::string weights = read_file(dir / "ck/model.safetensors");
  write_file_atomic(dir / "ck/model.safetensors", weights.substr(0, weights.size() / 2));
  CHECK_THROWS_WITH(models::load_pretrained(dir / "ck"), Catch::Contains("model.safetensors") && Catch::Contains("truncated"));
  std::filesystem::remove(dir / "ck/model.safetensors");
  CHECK_THROWS_WITH(models::load_pretrained(dir / "ck"), Catch::Contains("no model.safetensors"));
  // A tensor of the wrong shape names the tensor and both shapes.
  io::write_safetensors(dir / "ck/model.safetensors", {{"transformer.wte.weight", at::zeros({3, 3})}});
  CHECK_THROWS_WITH(models::load_pretrained(dir / "ck"), Catch::Contains("'transformer.wte.weight' has shape [3, 3]"));
  // A file lacking tensors names the first missing one.
  io::write_safetensors(dir / "ck/model.safetensors", {{"unrelated", at::zeros({1})}});
  CHECK_THROWS_WITH(models::load_pretrained(dir / "ck"), Catch::Contains("lacks") && Catch::Contains("(transformer.wte.weight,"));
}

TEST_CASE("registry: pretraining objectives per model type, one source for pretrain and bench", "[models][registry]") {
  CHECK(models::pretraining_objective("bert") == "mlm+nsp");
  CHECK(models::pretraining_objective("bert", "mlm") == "mlm");
  CHECK(models::pretraining_objective("gpt2") == "clm");
  CHECK(models::pretraining_objective("t5") == "span");
  CHECK(models::pretraining_objective("transformer") == "seq2seq");
  CHECK(models::pretraining_architecture("bert", "mlm") == "BertForMaskedLM");
  CHECK(models::pretraining_architecture("bert", "mlm+nsp") == "BertForPreTraining");
  CHECK(models::pretraining_architecture("gpt2", "clm") == "GPT2LMHeadModel");
  CHECK(models::pretraining_architecture("bert", "mlm+sbo") == "BertForSpanPreTraining");
  CHECK(models::pretraining_architecture("roberta", "mlm+sbo") == "RobertaForSpanPreTraining");
  // lmkit-bench train --objective clm on BERT used to run.
  CHECK_THROWS_WITH(models::pretraining_objective("bert", "clm"),
                    Catch::Contains("objective 'clm' does not apply to model_type 'bert' (use mlm+nsp, mlm or mlm+sbo)"));
  CHECK_THROWS_WITH(models::pretraining_objective("llama"), Catch::Contains("unknown model_type 'llama'"));
}
