#include <catch2/catch.hpp>

#include <set>

#include "lmkit/core/config.h"
#include "lmkit/core/config_table.h"
#include "lmkit/core/error.h"
#include "lmkit/models/registry.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json preset_of(const std::string& name) { return load_json_file(test::source_dir() + "/models/" + name + ".json"); }

struct ToyConfig {
  int64_t layers = 2;
  int64_t pad = -1;
  double rate = 0.1;
  std::string act = "relu";
  bool tied = true;
  int64_t head = 0;
};

const ConfigTable<ToyConfig>& toy_table() {
  using C = ToyConfig;
  static const ConfigTable<C> table({fields::number("layers", &C::layers, int64_t{1}, int64_t{8}),
                                     fields::token_id("pad", &C::pad),
                                     fields::nullable("rate", &C::rate, 0.1, 0.0, 1.0),
                                     fields::choice("act", &C::act, {"relu", "gelu"}),
                                     fields::flag("tied", &C::tied).when([](const C& c) { return c.head == 1; }),
                                     fields::fixed<C>("variant", "plain")},
                                    {"ignored_key"});
  return table;
}

ToyConfig read_toy(const Json& j) {
  ToyConfig c;
  ConfigReader r(j, "toy.json");
  toy_table().read(r, c);
  r.finish();
  return c;
}

}  // namespace

TEST_CASE("config table: one row a field reads, checks, writes and lists", "[core][config]") {
  const ToyConfig c = read_toy({{"layers", 4}, {"pad", nullptr}, {"rate", nullptr}, {"act", "gelu"}, {"ignored_key", 7}});
  CHECK(c.layers == 4);
  CHECK(c.pad == -1);
  CHECK(c.rate == 0.1);
  CHECK(c.act == "gelu");
  Json written;
  toy_table().write(written, c);
  // -1 is no value of pad's range: written as HF's null; 0.1 is one of rate's: written as itself.
  CHECK(written == Json{{"layers", 4}, {"pad", nullptr}, {"rate", 0.1}, {"act", "gelu"}, {"variant", "plain"}});
  ToyConfig tied = c;
  tied.head = 1;
  Json with_head;
  toy_table().write(with_head, tied);
  CHECK(with_head.at("tied") == true);  // a key of one head only
  CHECK(read_toy(with_head).layers == 4);
  const Json rows = toy_table().describe(c, ToyConfig{});
  REQUIRE(rows.size() == 6);
  CHECK(rows[0] == Json{{"key", "layers"}, {"value", 4}, {"default", 2}, {"check", "integer in [1, 8]"}});
  CHECK(rows[3]["check"] == "gelu | relu");
  CHECK(rows[1]["check"] == "integer >= 0 or null");

  CHECK_THROWS_WITH(read_toy({{"layers", 9}}), Catch::Contains("toy.json: key 'layers' must be in [1, 8], got 9"));
  CHECK_THROWS_WITH(read_toy({{"layres", 3}}), Catch::Contains("unknown key 'layres' (did you mean 'layers'?)"));
  CHECK_THROWS_WITH(read_toy({{"act", "tanh"}}), Catch::Contains("key 'act' must be one of {gelu, relu}"));
  CHECK_THROWS_WITH(read_toy({{"variant", "fancy"}}), Catch::Contains("toy.json: key 'variant' = \"fancy\" is not supported"));
  CHECK_THROWS_WITH(read_toy({{"tied", 1}}), Catch::Contains("key 'tied' must be true or false"));
}

TEST_CASE("config table: every family and head writes what it reads, and --fields lists what it wrote",
          "[models][config]") {
  for (const char* name : {"bert-mini", "roberta-mini", "gpt-mini", "llama-mini", "mistral-mini", "bloom-mini", "t5-mini",
                           "transformer-small"}) {
    const Json preset = preset_of(name);
    for (const auto& arch : models::supported_architectures(preset["model_type"].get<std::string>())) {
      INFO(name << " " << arch);
      auto model = models::create_model(preset, name, arch);
      const Json saved = model->config_json();
      auto again = models::create_model(saved, "saved", arch);
      CHECK(again->config_json() == saved);
      CHECK(again->architecture() == arch);
      const Json rows = model->config_fields();
      REQUIRE(rows.size() >= 10);
      std::set<std::string> keys;
      for (const auto& row : rows) {
        const std::string key = row["key"];
        keys.insert(key);
        CHECK_FALSE(row["check"].get<std::string>().empty());
        // What the listing shows is what the config holds (Llama writes its head counts resolved).
        if (saved.contains(key) && key != "num_key_value_heads" && key != "head_dim") CHECK(saved[key] == row["value"]);
      }
      // Every key the preset sets is a field of the table (or a key HF writes that lmkit ignores).
      for (auto it = preset.begin(); it != preset.end(); ++it) {
        if (it.key() != "model_type" && it.key() != "vocab_size" && it.key() != "rope_parameters") CHECK(keys.count(it.key()));
      }
    }
  }
}

TEST_CASE("config table: variants lmkit does not implement are refused by name, not ignored", "[models][config]") {
  auto refused = [](const std::string& name, const Json& change, const std::string& message) {
    Json j = preset_of(name);
    j.merge_patch(change);
    INFO(name << " " << change.dump());
    try {
      models::create_model(j, "m.json");
      FAIL("built");
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kInput);
      CHECK_THAT(e.what(), Catch::Contains(message));
    }
  };
  refused("gpt-mini", {{"scale_attn_weights", false}}, "m.json: key 'scale_attn_weights' = false is not supported");
  refused("gpt-mini", {{"reorder_and_upcast_attn", true}}, "key 'reorder_and_upcast_attn' = true is not supported");
  refused("bloom-mini", {{"apply_residual_connection_post_layernorm", true}},
          "key 'apply_residual_connection_post_layernorm' = true is not supported");
  refused("llama-mini", {{"hidden_act", "gelu"}}, "key 'hidden_act' = \"gelu\" is not supported");
  refused("llama-mini", {{"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}}}},
          "rope type 'linear' is not supported (lmkit implements rope_type 'default')");
  refused("llama-mini", {{"rope_scaling", {{"type", "dynamic"}}}}, "rope type 'dynamic' is not supported");
  refused("llama-mini", {{"rope_scaling", {{"type", 5}}}}, "rope type '5' is not supported");  // not nlohmann's type_error
  refused("llama-mini", {{"rope_scaling", {{"factor", 2.0}}}}, "rope type '{\"factor\":2.0}' is not supported");
  refused("llama-mini", {{"rope_parameters", {{"rope_type", "default"}, {"rope_thetta", 5000.0}}}},
          "unknown key 'rope_parameters.rope_thetta' (did you mean 'rope_parameters.rope_theta'?)");
  refused("llama-mini", {{"rope_theta", 0}}, "key 'rope_theta' must be a positive number");
  refused("mistral-mini", {{"attention_bias", true}}, "unknown key 'attention_bias'");  // Mistral has no biases
  refused("t5-mini", {{"feed_forward_proj", "gated-gelu"}, {"dense_act_fn", "relu"}},
          "dense_act_fn/is_gated_act disagree with feed_forward_proj 'gated-gelu'");
  refused("bert-mini", {{"hiden_act", "gelu"}}, "unknown key 'hiden_act' (did you mean 'hidden_act'?)");

  // What each reads instead: the newer rope_parameters over the older top-level key; null as "none".
  Json rope = preset_of("llama-mini");
  rope["rope_theta"] = 1000.0;
  rope["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000.0}};
  CHECK(models::create_model(rope, "m.json")->config_json()["rope_parameters"]["rope_theta"] == 5000.0);
  Json t5 = preset_of("t5-mini");
  t5["num_decoder_layers"] = nullptr;
  const Json t5_saved = models::create_model(t5, "m.json")->config_json();
  CHECK(t5_saved["num_decoder_layers"] == t5_saved["num_layers"]);
  Json gpt = preset_of("gpt-mini");
  gpt["n_inner"] = nullptr;
  CHECK(models::create_model(gpt, "m.json")->config_json()["n_inner"].is_null());
}
