// lmkit-generate: continues prompts with a GPT, T5 or Transformer checkpoint —
// greedy, sampling or beam search on the KV cache — or, with --fill-mask, fills the
// masks of a text with a masked LM's most likely tokens (HF's fill-mask pipeline).
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "lmkit/core/app.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/stop.h"
#include "lmkit/core/config.h"
#include "lmkit/eval/fill_mask.h"
#include "lmkit/eval/generation.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace {

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) throw lmkit::InputError("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(id);
  }
  if (ids.empty()) throw lmkit::InputError("--prompt-ids: no ids given");
  return ids;
}

// The prompts as ids: --prompt-ids as given, --prompt text encoded (with EOS for an
// encoder, which reads a whole sentence ended as in training).
std::vector<std::vector<int64_t>> prompt_tokens(const std::vector<std::string>& prompt_ids,
                                                const std::vector<std::string>& prompts,
                                                const lmkit::tokenizer::Tokenizer* tok,
                                                const lmkit::models::GenerationSpec& spec) {
  std::vector<std::vector<int64_t>> inputs;
  for (const auto& text_ids : prompt_ids) inputs.push_back(parse_ids(text_ids));
  for (const auto& text : prompts) {
    auto ids = tok->encode(text);
    if (spec.encoder_decoder && tok->specials().eos >= 0) ids.push_back(tok->specials().eos);
    lmkit::check_input(!ids.empty(), "--prompt: the prompt is empty");
    inputs.emplace_back(ids.begin(), ids.end());
  }
  return inputs;
}

// "gpt2, t5 or transformer": the families with a text-to-text head, plugins' included.
std::string generators() {
  std::vector<std::string> names;
  for (const auto& f : lmkit::models::families()) {
    if (!f.head(lmkit::models::kTextToTextHead).empty()) names.push_back(f.model_type);
  }
  return lmkit::join_names(names, " or ");
}

// Generated ids as text, or comma-separated ids without a tokenizer.
void print_generation(const std::vector<int64_t>& out, const lmkit::tokenizer::Tokenizer* tok) {
  if (tok) {
    std::printf("%s\n", tok->decode(std::vector<int32_t>(out.begin(), out.end())).c_str());
    return;
  }
  std::string line;
  for (size_t i = 0; i < out.size(); ++i) line += (i ? "," : "") + std::to_string(out[i]);
  std::printf("%s\n", line.c_str());
}

// --fill-mask: each prompt's masks filled by the checkpoint's masked LM, `top_k` tokens each;
// a table, or with `json` one JSON line per prompt (HF's pipeline output: a list per mask).
void fill_masks(const std::string& checkpoint, const std::vector<std::string>& prompts, int64_t top_k, bool json,
                c10::Device device) {
  lmkit::check_input(lmkit::tokenizer::Tokenizer::present(checkpoint), checkpoint + ": --fill-mask needs the checkpoint's tokenizer");
  lmkit::check_input(!prompts.empty(), "--fill-mask needs --prompt TEXT with a mask token in it");
  const auto tok = lmkit::tokenizer::Tokenizer::load(checkpoint);
  const lmkit::Json config = lmkit::load_json_file(checkpoint + "/config.json");
  const auto& family = lmkit::models::family_of_config(config, checkpoint + "/config.json");
  std::vector<std::string> masked_lms;
  for (const auto& f : lmkit::models::families()) {
    for (const auto& o : f.objectives) {
      if (o.name == "mlm") masked_lms.push_back(f.model_type);
    }
  }
  std::string architecture;
  for (const auto& o : family.objectives) {
    if (o.name == "mlm") architecture = o.architecture;
  }
  lmkit::check_input(!architecture.empty(), checkpoint + ": --fill-mask needs a masked LM (model_type " +
                                                lmkit::join_names(masked_lms, " or ") + "), not " + family.model_type);
  auto model = lmkit::models::load_pretrained(checkpoint, architecture);
  model->to(device);
  for (const auto& text : prompts) {
    const auto masks = lmkit::eval::fill_mask(*model, tok, text, top_k, device);
    lmkit::Json line = lmkit::Json::array();
    if (!json) std::printf("%s\n", text.c_str());
    for (size_t m = 0; m < masks.size(); ++m) {
      lmkit::Json row = lmkit::Json::array();
      for (const auto& c : masks[m]) {
        row.push_back({{"score", c.score}, {"token", c.token}, {"token_str", c.token_str}, {"sequence", c.sequence}});
        if (!json) std::printf("  mask %zu  %-20s %.4f\n", m + 1, c.token_str.c_str(), c.score);
      }
      line.push_back(row);
    }
    if (json) std::printf("%s\n", line.dump().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = lmkit::load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-generate: continue prompts with a checkpoint that generates text (model_type " + generators() + ")");
  lmkit::RuntimeOptions runtime;
  lmkit::eval::GenerationOptions o;
  std::string checkpoint;
  std::vector<std::string> prompts, prompt_ids;
  bool greedy = false, print_ids = false, no_cache = false, fill = false, json = false;
  app.add_option("--checkpoint", checkpoint, "checkpoint directory")->required();
  auto* text = app.add_option("--prompt", prompts, "prompt text (needs the checkpoint's tokenizer); repeatable");
  auto* ids = app.add_option("--prompt-ids", prompt_ids, "prompt as comma-separated token ids, e.g. 5,17,42; repeatable");
  text->excludes(ids);
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate at most")->check(lmkit::positive());
  auto* g = app.add_flag("--greedy", greedy, "argmax decoding (the default)");
  auto* k = app.add_option("--top-k", o.top_k, "sample from the k most likely tokens")->check(lmkit::non_negative());
  auto* p = app.add_option("--top-p", o.top_p, "sample from the nucleus of probability p")->check(lmkit::in_range(0.0, 1.0));
  auto* t = app.add_option("--temperature", o.temperature, "sampling temperature")->check(lmkit::positive());
  auto* b = app.add_option("--beams", o.num_beams, "beam search with B beams")->check(lmkit::positive())->default_str("greedy decoding");
  app.add_option("--length-penalty", o.length_penalty, "beam score = log p / length^penalty");
  app.add_flag("--ids", print_ids,
               "print the generated ids (prompt excluded), comma-separated, one line per prompt; "
               "without it, text when the checkpoint has a tokenizer");
  app.add_flag("--no-cache", no_cache, "re-run the whole sequence each step (slow; for checking the cache)");
  app.add_flag("--fill-mask", fill,
               "fill each mask token of --prompt with a masked LM's --top-k (default 5) most likely tokens "
               "(a checkpoint whose family pretrains with mlm; HF's fill-mask pipeline)")
      ->excludes(g)->excludes(p)->excludes(t)->excludes(b)->excludes(ids);
  app.add_flag("--json", json, "with --fill-mask: one JSON line per prompt, a list of candidates per mask");
  g->excludes(k)->excludes(p)->excludes(t)->excludes(b);
  b->excludes(k)->excludes(p)->excludes(t);
  lmkit::add_runtime_flags(app, runtime);
  return lmkit::run_app(app, argc, argv, [&] {
    lmkit::StopSignals signals;  // SIGTERM/SIGINT stop generation between tokens (exit 3)
    if (prompts.empty() && prompt_ids.empty()) throw lmkit::InputError("give --prompt TEXT or --prompt-ids 1,2,3");
    const c10::Device device = lmkit::init_runtime(runtime);
    lmkit::check_input(std::filesystem::is_directory(checkpoint), "--checkpoint " + checkpoint + ": no such checkpoint directory");
    lmkit::check_input(!json || fill, "--json applies to --fill-mask");
    if (fill) return fill_masks(checkpoint, prompts, k->count() ? o.top_k : 5, json, device);
    const bool has_tokenizer = lmkit::tokenizer::Tokenizer::present(checkpoint);
    if (!prompts.empty() && !has_tokenizer) {
      throw lmkit::InputError(checkpoint + ": no tokenizer, so text prompts cannot be encoded; use --prompt-ids");
    }
    std::optional<lmkit::tokenizer::Tokenizer> tok;
    if (has_tokenizer) tok = lmkit::tokenizer::Tokenizer::load(checkpoint);
    o.search = b->count() ? lmkit::eval::Search::kBeam
               : (k->count() || p->count() || t->count()) ? lmkit::eval::Search::kSample
                                                          : lmkit::eval::Search::kGreedy;
    o.seed = runtime.seed;
    o.use_cache = !no_cache;
    auto model = lmkit::models::load_pretrained(checkpoint);
    model->to(device);
    for (const auto& ids : prompt_tokens(prompt_ids, prompts, tok ? &*tok : nullptr, model->generation_spec())) {
      // One prompt at a time: decoder-only prompts cannot share a batch unpadded.
      at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0).to(device);
      print_generation(lmkit::eval::generate(*model, input, {}, o)[0], print_ids || !tok ? nullptr : &*tok);
    }
  });
}
