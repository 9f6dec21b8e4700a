#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/bert.h"
#include "lmkit/models/gpt.h"
#include "lmkit/models/model.h"
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
  const models::SkipWeightInit shapes_only;  // counts, not values: no random draw (as lmkit-info)
  CHECK(models::count_parameters(*models::create_model(preset("bert-base"), "bert-base.json", "BertModel")) == 109482240);
  CHECK(models::count_parameters(*models::create_model(preset("gpt2-small"), "gpt2-small.json")) == 124439808);
  CHECK(models::count_parameters(*models::create_model(preset("t5-small"), "t5-small.json")) == 60506624);
  CHECK(models::count_parameters(*models::create_model(preset("t5-base"), "t5-base.json")) == 222903552);
}

TEST_CASE("registry: every preset builds and its config round-trips", "[models][registry]") {
  const models::SkipWeightInit configs_only;  // what is checked is the config, not the weights' values
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

TEST_CASE("registry: every special-token id at the vocabulary's edge builds, one past it is a named input error",
          "[models][registry]") {
  // Each family's tiny config (vocabulary of 50 ids); RoBERTa needs positions past its padding id.
  const std::vector<Json> configs = {
      {{"model_type", "bert"}, {"vocab_size", 50}, {"hidden_size", 8}, {"num_hidden_layers", 1},
       {"num_attention_heads", 2}, {"intermediate_size", 8}, {"max_position_embeddings", 8}},
      {{"model_type", "roberta"}, {"vocab_size", 50}, {"hidden_size", 8}, {"num_hidden_layers", 1},
       {"num_attention_heads", 2}, {"intermediate_size", 8}, {"max_position_embeddings", 60}},
      {{"model_type", "gpt2"}, {"vocab_size", 50}, {"n_embd", 8}, {"n_layer", 1}, {"n_head", 2}, {"n_positions", 8}},
      {{"model_type", "t5"}, {"vocab_size", 50}, {"d_model", 8}, {"d_kv", 4}, {"d_ff", 8}, {"num_layers", 1},
       {"num_heads", 2}},
      {{"model_type", "transformer"}, {"vocab_size", 50}, {"d_model", 8}, {"encoder_layers", 1}, {"decoder_layers", 1},
       {"num_heads", 2}, {"d_ff", 8}, {"max_position_embeddings", 8}},
  };
  for (const Json& base : configs) {
    // The ids HF's configs hold (mask and cls ids are the tokenizer's, not a config key);
    // each family reads them or ignores them, and checks them either way.
    for (const char* name : {"pad", "bos", "eos", "decoder_start", "sep"}) {
      const std::string key = std::string(name) + "_token_id";
      INFO(base["model_type"].get<std::string>() << " " << key);
      Json edge = base;
      edge[key] = 49;
      auto model = models::create_model(edge, "m.json");
      CHECK(model->vocab_size() == 50);
      Json past = base;
      past[key] = 50;
      try {
        models::create_model(past, "m.json");
        FAIL("built with " << key << " = 50 of a 50-id vocabulary");
      } catch (const Error& e) {
        CHECK(e.code() == ExitCode::kInput);
        CHECK_THAT(e.what(), Catch::StartsWith("m.json: key '" + key + "' = 50 is outside the vocabulary (") &&
                                 Catch::EndsWith("vocab_size 50: ids 0 to 49)"));
      }
    }
  }
  // GPT's defaults (HF's 50256) are no id of a 50-id vocabulary: none, as null says.
  auto gpt = models::create_model(configs[2], "m.json");
  CHECK(gpt->config_json()["bos_token_id"].is_null());
  CHECK(gpt->config_json()["eos_token_id"].is_null());
  // The fuzzer's finding (tests/fuzz/regressions/json_config): LibTorch's "Padding_idx must be
  // within num_embeddings" escaped from RoBERTa's embedding; a default id counts too.
  CHECK_THROWS_WITH(models::create_model({{"model_type", "roberta"}, {"vocab_size", 1}, {"pad_token_id", 1}}, "c.json"),
                    "c.json: key 'pad_token_id' = 1 is outside the vocabulary (vocab_size 1: ids 0 to 0)");
  CHECK_THROWS_WITH(models::create_model({{"model_type", "roberta"}, {"vocab_size", 1}}, "c.json"),
                    Catch::StartsWith("c.json: key 'pad_token_id' = 1 is outside"));
  CHECK_THROWS_WITH(
      models::create_model({{"model_type", "roberta"}, {"vocab_size", 8}, {"max_position_embeddings", 2}}, "c.json"),
      Catch::StartsWith("c.json: key 'max_position_embeddings' = 2 leaves no position after pad_token_id 1"));
  // T5's relative buckets: too few, or a max_distance inside the exact range, index past the embedding.
  Json t5 = configs[3];
  t5["relative_attention_num_buckets"] = 3;
  CHECK_THROWS_WITH(models::create_model(t5, "c.json"),
                    Catch::StartsWith("c.json: key 'relative_attention_num_buckets' = 3 is too few"));
  t5["relative_attention_num_buckets"] = 8;
  t5["relative_attention_max_distance"] = 4;
  CHECK_THROWS_WITH(models::create_model(t5, "c.json"),
                    Catch::StartsWith("c.json: key 'relative_attention_max_distance' = 4 must exceed"));
  t5["relative_attention_max_distance"] = 5;
  CHECK_NOTHROW(models::create_model(t5, "c.json"));
}

TEST_CASE("registry: the config fuzzer's findings are refused with a named input error", "[models][registry]") {
  // tests/fuzz/regressions/json_config: configs the json_config harness once failed on, as it saved them.
  int replayed = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(test::source_dir() + "/tests/fuzz/regressions/json_config")) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    try {
      models::create_model(parse_json(read_file(entry.path().string()), name), name);
      FAIL("built");
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kInput);
      CHECK_THAT(e.what(), Catch::StartsWith(name + ": key '"));
    }
    ++replayed;
  }
  CHECK(replayed >= 1);
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

TEST_CASE("registry: a checkpoint holding every weight loads without the random draw, to the same tensors",
          "[models][registry]") {
  test::TempDir dir;
  auto configs = tiny_configs();
  for (const char* mini : {"llama-mini", "mistral-mini", "bloom-mini", "roberta-mini", "longformer-mini", "bigbird-mini",
                           "vit-mini", "vit-mae-mini"}) {
    configs.emplace_back(mini, preset(mini));
  }
  at::manual_seed(3);
  for (const auto& [name, config] : configs) {
    INFO(name);
    const std::string arch = config.contains("model_type") && name.find("-mini") == std::string::npos ? name : "";
    auto model = models::create_model(config, name + ".json", arch);
    models::save_pretrained(*model, dir / name);
    auto loaded = models::load_pretrained(dir / name);
    // Every parameter and buffer, not only those the file holds: nothing the skipped
    // initialisation would have set is left as LibTorch's modules made it.
    for (const bool buffers : {false, true}) {
      const auto a = buffers ? model->named_buffers() : model->named_parameters();
      const auto b = buffers ? loaded->named_buffers() : loaded->named_parameters();
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].key());
        CHECK(a[i].key() == b[i].key());
        CHECK(at::equal(a[i].value(), b[i].value()));
      }
    }
  }
  // The scope is what skips it: a layer's weights keep LibTorch's Kaiming-uniform (std 1/sqrt(3·16) = 0.14
  // for 16 inputs) instead of GPT-2's N(0, 0.02); after the scope, the draw is back.
  const Json gpt = tiny_configs()[2].second;
  auto ffn_std = [](models::Model& m) {
    for (const auto& p : m.named_parameters()) {
      if (p.key().find("ffn.in.weight") != std::string::npos) return p.value().std().item<double>();
    }
    return -1.0;
  };
  {
    const models::SkipWeightInit skip;
    CHECK_FALSE(models::initialise_weights());
    CHECK(ffn_std(*models::create_model(gpt, "tiny.json")) > 0.1);
  }
  CHECK(models::initialise_weights());
  const double drawn = ffn_std(*models::create_model(gpt, "tiny.json"));
  CHECK((drawn > 0.01 && drawn < 0.03));
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
  // The new head drew BERT's N(0, 0.02) (not LibTorch's Kaiming-uniform, std 0.14 for 16 inputs).
  const double head_std = b.classifier->weight.std().item<double>();
  CHECK((head_std > 0.005 && head_std < 0.05));
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
  CHECK(models::pretraining_architecture("llama", "clm") == "LlamaForCausalLM");
  CHECK_THROWS_WITH(models::pretraining_objective("nonesuch"), Catch::Contains("unknown model_type 'nonesuch'"));
}

namespace {

// A GPT-2 trained together with a second, smaller one saved in companion/ (ELECTRA's shape:
// a discriminator and its generator). GptImpl's hf_tensors() name its own tensors only.
class PairedGpt : public lmkit::models::GptImpl {
 public:
  PairedGpt(lmkit::models::GptConfig main, lmkit::models::GptConfig side)
      : GptImpl(std::move(main)), side_(register_module("side", lmkit::models::Gpt(std::move(side)))) {}
  std::vector<std::pair<std::string, Model*>> companions() override { return {{"companion", side_.get()}}; }
  lmkit::models::Gpt side_;
};

lmkit::models::GptConfig tiny_gpt_config(int64_t width) {
  lmkit::models::GptConfig c;
  c.vocab_size = 50, c.n_positions = 16, c.n_embd = width, c.n_layer = 1, c.n_head = 2;
  c.bos_token_id = c.eos_token_id = 0;
  return c;
}

}  // namespace

TEST_CASE("registry: companions are saved in their folders and read back, strictly", "[models][registry]") {
  lmkit::test::TempDir tmp;
  const std::string dir = (tmp.path / "pair").string();
  at::manual_seed(1);
  PairedGpt saved(tiny_gpt_config(16), tiny_gpt_config(8));
  lmkit::models::save_pretrained(saved, dir);
  REQUIRE(std::filesystem::exists(dir + "/companion/config.json"));
  REQUIRE(std::filesystem::exists(dir + "/companion/model.safetensors"));
  // The main checkpoint is a plain GPT-2 (HF loads it alone); the companion one of its own.
  const auto main_alone = lmkit::models::load_pretrained(dir);
  CHECK(lmkit::models::count_parameters(*main_alone) == lmkit::models::count_parameters(saved) -
                                                            lmkit::models::count_parameters(*saved.side_));
  at::manual_seed(2);
  PairedGpt loaded(tiny_gpt_config(16), tiny_gpt_config(8));
  CHECK_FALSE(at::equal(loaded.side_->wte->weight, saved.side_->wte->weight));
  CHECK(lmkit::models::load_companions(loaded, dir) == std::vector<std::string>{"companion"});
  CHECK(at::equal(loaded.side_->wte->weight, saved.side_->wte->weight));
  // A companion of another size is refused, naming the file; a missing folder keeps the initialisation.
  PairedGpt wider(tiny_gpt_config(16), tiny_gpt_config(16));
  CHECK_THROWS_WITH(lmkit::models::load_companions(wider, dir), Catch::Contains("companion/model.safetensors"));
  std::filesystem::remove_all(dir + "/companion");
  CHECK(lmkit::models::load_companions(loaded, dir).empty());
}

TEST_CASE("registry: Llama's and Mistral's FLOPs a token ask each attention, a window's keys at most", "[models][registry]") {
  for (const auto& [name, architecture] : {std::pair<std::string, std::string>{"llama-mini", "LlamaForCausalLM"},
                                           {"mistral-mini", "MistralForCausalLM"}}) {
    const Json c = preset(name);
    auto model = models::create_model(c, name + ".json", architecture);
    const double d = c["hidden_size"].get<double>(), v = c["vocab_size"].get<double>(), ff = c["intermediate_size"].get<double>();
    const double h = c["num_attention_heads"].get<double>(), kv = c["num_key_value_heads"].get<double>(), hd = d / h;
    const double layers = c["num_hidden_layers"].get<double>();
    const int64_t window = c.value("sliding_window", int64_t{0});
    for (int64_t t : {16, 64, 512}) {
      const double keys = static_cast<double>(window > 0 ? std::min(t, window) : t);
      // The LM head, each layer's q, k, v, o and three MLP matrices, and attention over `keys` positions.
      const double want = 2 * d * v + layers * (2 * (2 * d * h * hd + 2 * d * kv * hd + 3 * d * ff) + 4 * keys * h * hd);
      CAPTURE(name, t);
      CHECK(model->flops_per_token(t, 0) == Approx(want).epsilon(1e-12));
    }
  }
}
