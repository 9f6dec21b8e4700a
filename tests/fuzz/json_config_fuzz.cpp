// Fuzzes the JSON config path: parse_json (depth, duplicates, line numbers) and the
// model registry's strict readers behind every config.json (all four families).
#include "fuzz_util.h"
#include "lmkit/core/config.h"
#include "lmkit/models/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmkit::fuzz::expect_input_errors([&] {
    const lmkit::Json config = lmkit::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
    (void)lmkit::brief_json(config);
    // Build only small models: the fuzzer would otherwise spend its time in
    // allocating and initialising weights (huge sizes are an error path tested elsewhere).
    if (config.is_object()) {
      for (const char* key : {"vocab_size", "hidden_size", "n_embd", "d_model", "d_ff", "intermediate_size", "n_inner",
                              "num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "max_position_embeddings",
                              "n_positions", "src_vocab_size", "tgt_vocab_size", "d_kv", "num_heads", "n_head",
                              "num_attention_heads", "relative_attention_num_buckets", "type_vocab_size", "d_ff",
                              "num_labels", "max_len", "encoder_layers", "decoder_layers"}) {
        if (config.contains(key) && config[key].is_number() && config[key].get<double>() > 64) return;
      }
      if (config.contains("id2label") && config["id2label"].size() > 64) return;
    }
    (void)lmkit::models::create_model(config, "fuzz.json");
  });
  return 0;
}
