// lmkit-generate: continues prompts with a GPT, T5 or Transformer checkpoint —
// greedy, sampling or beam search on the KV cache.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "lmkit/core/app.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/stop.h"
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

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = lmkit::load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-generate: continue prompts with a checkpoint that generates text (model_type " + generators() + ")");
  lmkit::RuntimeOptions runtime;
  lmkit::eval::GenerationOptions o;
  std::string checkpoint;
  std::vector<std::string> prompts, prompt_ids;
  bool greedy = false, print_ids = false, no_cache = false;
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
  g->excludes(k)->excludes(p)->excludes(t)->excludes(b);
  b->excludes(k)->excludes(p)->excludes(t);
  lmkit::add_runtime_flags(app, runtime);
  return lmkit::run_app(app, argc, argv, [&] {
    lmkit::StopSignals signals;  // SIGTERM/SIGINT stop generation between tokens (exit 3)
    if (prompts.empty() && prompt_ids.empty()) throw lmkit::InputError("give --prompt TEXT or --prompt-ids 1,2,3");
    const c10::Device device = lmkit::init_runtime(runtime);
    lmkit::check_input(std::filesystem::is_directory(checkpoint), "--checkpoint " + checkpoint + ": no such checkpoint directory");
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
      const auto out = lmkit::eval::generate(*model, input, {}, o)[0];
      if (print_ids || !tok) {
        std::string line;
        for (size_t i = 0; i < out.size(); ++i) line += (i ? "," : "") + std::to_string(out[i]);
        std::printf("%s\n", line.c_str());
      } else {
        std::printf("%s\n", tok->decode(std::vector<int32_t>(out.begin(), out.end())).c_str());
      }
    }
  });
}
