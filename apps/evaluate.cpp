// lmkit-evaluate: measures a checkpoint on data — causal perplexity (per token,
// per word, bits per byte), masked-LM perplexity, pseudo-perplexity, T5 span
// loss, classification metrics, and BLEU of beam-search translations.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "lmkit/core/app.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/tasks.h"
#include "lmkit/eval/classification.h"
#include "lmkit/eval/generation.h"
#include "lmkit/eval/metrics.h"
#include "lmkit/eval/perplexity.h"
#include "lmkit/models/registry.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

struct Args {
  RuntimeOptions runtime;
  std::string checkpoint, data, metric, output, references;
  data::ColumnSpec columns;
  int64_t context = 0, stride = 0, seq_len = 128, batch_size = 8, max_sequences = 0, beams = 4, max_new_tokens = 64;
};

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open file");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

void print_table(const Json& r) {
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it.value().is_number_float()) std::printf("%-18s %.4f\n", it.key().c_str(), it.value().get<double>());
    else std::printf("%-18s %s\n", it.key().c_str(), it.value().dump().c_str());
  }
}

void run(const Args& a) {
  const c10::Device device = init_runtime(a.runtime);
  const std::set<std::string> metrics = {"perplexity", "mlm-perplexity", "pseudo-perplexity", "span", "classification", "bleu"};
  check_input(metrics.count(a.metric), "--metric '" + a.metric +
                                           "' is not one of perplexity, mlm-perplexity, pseudo-perplexity, span, "
                                           "classification, bleu");
  check_input(fs::exists(a.data), a.data + ": no such file or corpus directory");
  check_input(tokenizer::Tokenizer::present(a.checkpoint),
              a.checkpoint + ": no tokenizer (evaluation needs the checkpoint's tokenizer)");
  const auto tok = tokenizer::Tokenizer::load(a.checkpoint);
  const Json config = load_json_file(a.checkpoint + "/config.json");
  const std::string type = config.value("model_type", "");
  const std::string work = (fs::temp_directory_path() / ("lmkit-eval-" + std::to_string(::getpid()))).string();
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};

  Json r;
  if (a.metric == "classification") {
    auto model = models::load_pretrained(a.checkpoint);
    const std::string arch = model->architecture();
    if (arch.find("SequenceClassification") == std::string::npos) {
      throw InputError(a.checkpoint + ": " + arch + " has no classification head (finetune it first)");
    }
    const Json model_config = model->config_json();
    const int64_t num_labels = static_cast<int64_t>(model_config.value("id2label", Json::object()).size());
    const auto label_map = data::load_label_map(a.checkpoint, num_labels);
    data::ColumnSpec cols = a.columns;
    cols.regression = num_labels == 1;
    model->to(device);
    const int64_t max_length = config.value("max_position_embeddings", config.value("n_positions", int64_t{512}));
    auto ds = std::make_shared<data::ClassificationDataset>(a.data, cols, tok, std::min<int64_t>(a.seq_len, max_length), label_map);
    r = eval::evaluate_classifier(*model, ds, a.batch_size, data::pad_id(tok), device);
  } else if (a.metric == "bleu") {
    auto model = models::load_pretrained(a.checkpoint);
    check_input(!a.references.empty(), "--metric bleu needs --references FILE (one reference per source line)");
    const auto sources = read_lines(a.data), refs = read_lines(a.references);
    check_input(sources.size() == refs.size(), a.data + " and " + a.references + " differ in line count");
    model->to(device);
    eval::GenerationOptions g;
    g.search = eval::Search::kBeam, g.num_beams = a.beams, g.max_new_tokens = a.max_new_tokens;
    std::vector<std::string> hypotheses;
    const int32_t eos = tok.specials().eos;
    for (const auto& s : sources) {
      auto ids = tok.encode(s);
      ids.push_back(eos);
      at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0).to(device);
      auto out = eval::generate(*model, input, {}, g)[0];
      if (!out.empty() && out.back() == eos) out.pop_back();
      hypotheses.push_back(tok.decode(std::vector<int32_t>(out.begin(), out.end())));
    }
    const auto b = eval::corpus_bleu(hypotheses, {refs});
    r = {{"bleu", b.bleu}, {"precisions", b.precisions}, {"brevity_penalty", b.brevity_penalty},
         {"hypothesis_length", b.hypothesis_length}, {"reference_length", b.reference_length},
         {"sentences", hypotheses.size()}};
  } else {
    auto corpus = eval::corpus_of(a.data, tok, work);
    if (a.metric == "perplexity") {
      check_input(type == "gpt2", "--metric perplexity is for causal LMs (gpt2); this checkpoint is " + type);
      auto model = models::load_pretrained(a.checkpoint);
      model->to(device);
      eval::SlidingWindow w{a.context > 0 ? a.context : config.value("n_positions", int64_t{1024}), a.stride, a.batch_size};
      check_input(w.context <= config.value("n_positions", int64_t{1024}), "--context exceeds the model's n_positions");
      eval::TextStats stats;
      const bool text = !data::is_corpus(a.data);
      if (text) stats = eval::text_stats(a.data);
      r = eval::causal_perplexity(*model, *corpus, tok.specials().eos, w, device, text ? &stats : nullptr);
    } else if (a.metric == "mlm-perplexity" || a.metric == "pseudo-perplexity") {
      check_input(type == "bert", "--metric " + a.metric + " is for BERT; this checkpoint is " + type);
      auto model = models::load_pretrained(a.checkpoint, "BertForMaskedLM");
      model->to(device);
      r = a.metric == "mlm-perplexity" ? eval::masked_lm_perplexity(*model, corpus, tok, a.seq_len, a.batch_size, device)
                                       : eval::pseudo_perplexity(*model, corpus, tok, a.seq_len, a.max_sequences, device);
    } else {
      check_input(type == "t5", "--metric span is for T5; this checkpoint is " + type);
      auto model = models::load_pretrained(a.checkpoint);
      model->to(device);
      r = eval::span_perplexity(*model, corpus, tok, a.seq_len, a.batch_size, device);
    }
  }
  r["metric"] = a.metric;
  r["checkpoint"] = a.checkpoint;
  r["data"] = a.data;
  print_table(r);
  const std::string out = a.output.empty() ? "result.json" : a.output;
  save_json_file(out, r);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("lmkit-evaluate: perplexity, masked-LM perplexity, span loss, classification metrics or BLEU of a checkpoint");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Args a;
  app.add_option("--checkpoint", a.checkpoint, "checkpoint directory (lmkit's or HuggingFace's, with its tokenizer)")->required();
  app.add_option("--data", a.data, "text file, corpus directory, labelled file, or source sentences (bleu)")->required();
  app.add_option("--metric", a.metric, "perplexity | mlm-perplexity | pseudo-perplexity | span | classification | bleu")
      ->required();
  app.add_option("--output", a.output, "result JSON file (default result.json)");
  app.add_option("--context", a.context, "perplexity: tokens per window (default: the model's maximum)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stride", a.stride, "perplexity: window step (default: = context)")->check(CLI::NonNegativeNumber);
  app.add_option("--seq-len", a.seq_len, "sequence length (mlm, pseudo, span) or max length (classification)")
      ->check(CLI::Range(8, 1 << 16));
  app.add_option("--batch-size", a.batch_size, "sequences per batch")->check(CLI::PositiveNumber);
  app.add_option("--max-sequences", a.max_sequences, "pseudo-perplexity: sequences scored (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--text-column", a.columns.text, "classification: text column");
  app.add_option("--text-pair-column", a.columns.text_pair, "classification: second text column");
  app.add_option("--label-column", a.columns.label, "classification: label column");
  app.add_option("--references", a.references, "bleu: reference translations, one per line");
  app.add_option("--beams", a.beams, "bleu: beam width")->check(CLI::PositiveNumber);
  app.add_option("--max-new-tokens", a.max_new_tokens, "bleu: longest translation")->check(CLI::PositiveNumber);
  add_runtime_flags(app, a.runtime);
  return run_app(app, argc, argv, [&] { run(a); });
}
