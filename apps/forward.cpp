// lmkit-forward: runs a checkpoint on named input tensors and writes its
// outputs under HF's names — the tool for checking lmkit against Python.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/registry.h"

namespace {

// The named input tensors of a safetensors file as a Batch: other names are the model's
// extra inputs (next_sentence_label; an image model's pixel_values), which it refuses unless
// it reads them.
lmkit::Batch read_inputs(const std::string& path) {
  const auto file = lmkit::io::read_safetensors(path);
  const std::set<std::string> fields{"input_ids",      "attention_mask", "token_type_ids",      "decoder_input_ids",
                                     "decoder_attention_mask", "labels"};
  lmkit::Batch batch;
  const bool images = file.get("pixel_values").defined();
  for (const auto& t : file.tensors) {
    if (fields.count(t.first)) continue;
    // Without input_ids (or an image model's pixel_values) an extra name is more likely a misspelt field.
    if (!file.get("input_ids").defined() && !images) {
      throw lmkit::InputError(path + ": unknown input tensor '" + t.first + "' and no input_ids");
    }
    batch.extra[t.first] = t.second;
  }
  batch.input_ids = images ? file.get("input_ids") : file.at("input_ids", path);
  batch.attention_mask = file.get("attention_mask");
  batch.token_type_ids = file.get("token_type_ids");
  batch.decoder_input_ids = file.get("decoder_input_ids");
  batch.decoder_attention_mask = file.get("decoder_attention_mask");
  batch.labels = file.get("labels");
  // HF adds (1 − mask) · min to the scores: a 2 there is a large positive bias, not "attend";
  // lmkit reads any non-zero as 1. Either way the numbers are not what was meant: refused.
  for (const char* name : {"attention_mask", "decoder_attention_mask"}) {
    const at::Tensor m = file.get(name);
    if (m.defined() && m.numel() > 0 && !m.eq(0).logical_or(m.eq(1)).all().item<bool>()) {
      throw lmkit::InputError(path + ": " + name + " holds values other than 0 and 1 (1: a token to attend to, 0: padding)");
    }
  }
  return batch;
}

// The outputs under HF's names (on the CPU), hidden states and gradients when asked.
std::vector<std::pair<std::string, at::Tensor>> named_outputs(lmkit::models::Model& model, const lmkit::Output& out,
                                                              bool gradients) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    if (t.defined()) tensors.emplace_back(name, t.detach().to(at::kCPU));
  };
  add("loss", out.loss);
  // A loss of several terms (BERT's mlm + nsp, SpanBERT's mlm + sbo) also gives each: loss.mlm, loss.sbo.
  if (out.terms.size() > 1) {
    for (const auto& term : out.terms) add("loss." + term.name, term.mean);
  }
  add("logits", out.logits);
  add("last_hidden_state", out.last_hidden_state);
  add("pooler_output", out.pooler_output);
  for (const auto& [name, tensor] : out.named) add(name, tensor);  // the model's own (HF's names)
  add("encoder_last_hidden_state", out.encoder_last_hidden_state);
  for (size_t i = 0; i < out.hidden_states.size(); ++i) add("hidden_states." + std::to_string(i), out.hidden_states[i]);
  for (size_t i = 0; i < out.encoder_hidden_states.size(); ++i) {
    add("encoder_hidden_states." + std::to_string(i), out.encoder_hidden_states[i]);
  }
  if (gradients) {
    for (const auto& [name, grad] : lmkit::models::hf_gradients(model)) add("grad." + name, grad);
  }
  return tensors;
}

constexpr const char* kInputsHelp =
    "safetensors with input_ids and optionally attention_mask, token_type_ids, decoder_input_ids, decoder_attention_mask, "
    "labels, and the inputs the model reads besides (next_sentence_label; an image model's pixel_values instead of input_ids)";

// --save DIR: refused when DIR is a file, or exists without --overwrite.
void check_save(const std::string& save, bool overwrite) {
  if (!std::filesystem::exists(save)) return;
  lmkit::check_input(std::filesystem::is_directory(save), "--save " + save + ": is a file, not a checkpoint directory");
  lmkit::check_input(overwrite, "--save " + save + ": exists; give --overwrite to replace it");
}

// The model as it ran into `save`, with the files beside the checkpoint's weights that describe
// its inputs (tokenizer, image preprocessing).
void save_as_run(lmkit::models::Model& model, const std::string& checkpoint, const std::string& save) {
  model.to(c10::kCPU);
  lmkit::models::save_pretrained(model, save, [&](const std::string& tmp) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                          "tokenizer.lmkit.json", "vocab.txt", "vocab.json", "merges.txt", "spiece.model",
                          "preprocessor_config.json"}) {
      if (std::filesystem::exists(checkpoint + "/" + f)) std::filesystem::copy_file(checkpoint + "/" + f, tmp + "/" + f);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = lmkit::load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-forward: run a checkpoint on input tensors from a safetensors file and write its outputs");
  lmkit::RuntimeOptions runtime;
  std::string checkpoint, inputs, output, architecture, save;
  bool hidden_states = false, gradients = false, new_head = false, overwrite = false;
  app.add_option("--checkpoint", checkpoint, "checkpoint directory (config.json + model.safetensors)")->required();
  app.add_option("--inputs", inputs, kInputsHelp)->required();
  app.add_option("--output", output, "safetensors file to write")->required();
  app.add_option("--architecture", architecture, "run the checkpoint under another head (e.g. BertModel)");
  app.add_flag("--new-head", new_head, "with --architecture: start a head the checkpoint lacks at random");
  app.add_flag("--overwrite", overwrite, "replace the --output file (and the --save directory) if it exists");
  app.add_option("--save", save,
                 "also write the checkpoint as it ran (its --architecture, a --new-head's random weights) to this "
                 "directory, as HF's save_pretrained would: the weights, config.json and the tokenizer beside it");
  app.add_flag("--hidden-states", hidden_states, "also write hidden_states.N (and encoder_hidden_states.N)");
  app.add_flag("--gradients", gradients,
               "also write grad.NAME = d(loss)/d(parameter) under HF's parameter names (needs labels; dropout off)");
  lmkit::add_runtime_flags(app, runtime);
  return lmkit::run_app(app, argc, argv, [&] {
    const c10::Device device = lmkit::init_runtime(runtime);
    // One writer of --output at a time: two runs into one new file both passed the check below and
    // both reported success, the later silently replacing the other's outputs.
    const lmkit::OutputLock lock(output);
    std::optional<lmkit::OutputLock> save_lock;  // the --save directory is claimed the same way
    if (!save.empty()) save_lock.emplace(save, "--save");
    lmkit::check_output_file(output, overwrite);
    if (!save.empty()) check_save(save, overwrite);
    const lmkit::Batch batch = read_inputs(inputs);
    auto model = lmkit::models::load_pretrained(checkpoint, architecture, nullptr, lmkit::Json::object(), new_head);
    try {
      model->check_batch(batch);
    } catch (const lmkit::Error& e) {
      throw lmkit::InputError(inputs + ": " + e.what());
    }
    model->to(device);
    model->eval();
    model->full_logits = true;
    model->output_hidden_states = hidden_states;
    std::optional<at::NoGradGuard> no_grad;
    if (!gradients) no_grad.emplace();
    lmkit::Output out = model->forward(batch.to(device));
    if (gradients) {
      if (!out.loss.defined()) throw lmkit::InputError(inputs + ": --gradients needs labels (no loss to differentiate)");
      out.loss.backward();
    }
    const auto tensors = named_outputs(*model, out, gradients);
    if (!save.empty()) save_as_run(*model, checkpoint, save);
    lmkit::io::write_safetensors(output, tensors, {{"format", "pt"}, {"producer", "lmkit-forward"}});
    // A line per output; the parameter gradients (hundreds for a large model) as one count.
    std::printf("%s: %zu tensors\n", output.c_str(), tensors.size());
    size_t grads = 0;
    for (const auto& t : tensors) {
      if (t.first.rfind("grad.", 0) == 0) ++grads;
      else std::printf("  %-28s %s\n", t.first.c_str(), c10::str(t.second.sizes()).c_str());
    }
    if (grads > 0) std::printf("  grad.* (%zu parameter gradients, HF's parameter names)\n", grads);
  });
}
