// lmkit-tokenize: train a SentencePiece tokenizer (HuggingFace loads what it
// writes), encode text into a token corpus or into ids, say what a tokenizer is,
// and inspect the batches an objective makes of it.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "lmkit/core/app.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/corpus.h"
#include "lmkit/data/loader.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/data/text_input.h"
#include "lmkit/data/tokenizer_text.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/model.h"
#include "lmkit/tokenizer/families.h"
#include "lmkit/tokenizer/tokenizer.h"

using namespace lmkit;

namespace {

// One row as the model sees it: masked positions show [MASK]→original, random
// replacements ~piece→original; a token classifier's classes after a slash (piece/1,
// `classes` > 0); NSP segments split at [SEP]; targets after "||".
std::string render_row(const tokenizer::Tokenizer& tok, const Batch& b, int64_t row, int64_t classes) {
  std::string out;
  const auto ids = b.input_ids[row], mask = b.attention_mask[row];
  const bool aligned = b.labels.defined() && b.labels.dim() == 2 && b.labels.size(1) == b.input_ids.size(1);
  const bool masked_lm = aligned && classes == 0 && tok.specials().mask >= 0;  // causal LM labels just repeat the inputs
  for (int64_t j = 0; j < ids.size(0); ++j) {
    if (mask[j].item<int64_t>() == 0) break;
    const int32_t id = static_cast<int32_t>(ids[j].item<int64_t>());
    std::string piece = tok.piece(id);
    if (masked_lm) {
      const int64_t label = b.labels[row][j].item<int64_t>();
      if (label >= 0 && id == tok.specials().mask) piece += "→" + tok.piece(static_cast<int32_t>(label));
      else if (label >= 0 && label != id) piece = "~" + piece + "→" + tok.piece(static_cast<int32_t>(label));
      else if (label >= 0) piece = "=" + piece;  // chosen but kept
    } else if (aligned && classes > 0) {
      const int64_t label = b.labels[row][j].item<int64_t>();
      if (label >= 0) piece += "/" + std::to_string(label);
    }
    out += (j ? " " : "") + piece;
  }
  if (b.labels.defined() && b.labels.dim() == 2 && !aligned) {
    out += "  ||  ";
    for (int64_t j = 0; j < b.labels.size(1); ++j) {
      const int64_t label = b.labels[row][j].item<int64_t>();
      if (label < 0) break;
      out += (j ? " " : "") + tok.piece(static_cast<int32_t>(label));
    }
  }
  // An objective's own row labels (NSP's next_sentence_label: 1 = B is random).
  for (const auto& [name, t] : b.extra) out += "  [" + name + " " + std::to_string(t[row].item<int64_t>()) + "]";
  return out;
}

// What a tokenizer is: family, format, files, special tokens, template.
void describe(const tokenizer::Tokenizer& tok) {
  const auto& s = tok.specials();
  std::printf("tokenizer   %s\n", tok.source().c_str());
  std::printf("family      %s\n", tok.family().c_str());
  std::printf("format      %s\n", tok.format().c_str());
  std::printf("vocab size  %lld\n", static_cast<long long>(tok.vocab_size()));
  std::string specials;
  for (int32_t id : {s.pad, s.unk, s.cls, s.sep, s.mask, s.eos}) {
    if (id >= 0 && specials.find(" " + tok.piece(id) + "=") == std::string::npos) specials += " " + tok.piece(id) + "=" + std::to_string(id);
  }
  std::printf("specials   %s\n", specials.c_str());
  if (s.num_sentinels) {
    std::printf("sentinels   %d (<extra_id_0>=%d ... <extra_id_%d>=%d)\n", s.num_sentinels, tok.sentinel(0), s.num_sentinels - 1,
                tok.sentinel(s.num_sentinels - 1));
  }
  auto render = [&](const std::vector<tokenizer::Template::Item>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : " ") + (item.id >= 0 ? tok.piece(item.id) : item.sequence ? "$B" : "$A");
    return out;
  };
  std::printf("template    %s  |  %s\n", render(tok.post_processor().single).c_str(), render(tok.post_processor().pair).c_str());
}

// A --format or --text-field that no input would use is refused, not ignored (train and encode).
void check_text_flags_apply(const std::vector<std::string>& files, const std::string& format, data::TextFormat f,
                            const std::string& text_field, bool text_field_given) {
  if (f == data::TextFormat::kAuto && !text_field_given) return;
  bool text = false, fields = false;
  for (const auto& in : files) {
    const auto resolved = data::resolve_format(in, f);
    text = text || resolved.has_value();
    fields = fields || !resolved || *resolved == data::TextFormat::kJsonl;
  }
  check_input(f == data::TextFormat::kAuto || text, "--format " + format + ": every input is Parquet, which is read by "
                                                    "its column whatever the format (leave --format out)");
  check_input(!text_field_given || fields,
              "--text-field " + text_field + ": no input has fields to name (JSONL or Parquet): " +
                  (f == data::TextFormat::kAuto
                       ? files.front() + " is read as plain text (JSONL is *.jsonl or *.json, compressed or not, or "
                                         "give --format jsonl)"
                       : "--format " + format + " reads each input as plain text (give --format jsonl, or leave "
                                                "--format out)"));
}

// lmkit-tokenize train: a SentencePiece tokenizer with a family's special tokens.
struct TrainCommand {
  tokenizer::TrainOptions options;
  std::string family, format = "auto", text_field = "text";
  CLI::Option* model_type = nullptr;
  CLI::Option* text_field_given = nullptr;
  bool overwrite = false;
  CLI::App* add(CLI::App& app) {
    auto* t = app.add_subcommand("train", "train a SentencePiece tokenizer with a model family's special tokens");
    t->add_option("--input", options.inputs, "text files (plain, .gz or .zst) or Parquet files with a text column, "
                                              "directories of them or quoted glob patterns, as encode takes them")
        ->required()->expected(1, -1);
    t->add_option("--format", format, "auto, blank-line, lines or jsonl (as encode reads them)");
    text_field_given = t->add_option("--text-field", text_field, "JSONL field or Parquet column holding the text");
    t->add_option("--vocab-size", options.vocab_size, "vocabulary size, special tokens included")->required();
    std::vector<std::string> families;
    for (const auto& f : tokenizer::family_specs()) families.push_back(f.name);
    t->add_option("--family", family, join_names(families, " or ") + " (special tokens)")->required();
    t->add_option("--output", options.output,
                  "DIR (a tokenizer directory HF's AutoTokenizer loads) or PATH.model (with PATH.lmkit.json and "
                  "PATH.tokenizer.json beside it)")->required();
    model_type = t->add_option("--model-type", options.model_type, "unigram or bpe (a family may fix it)");
    // SentencePiece's own bounds: below 0.98 its trainer fails with no message.
    t->add_option("--character-coverage", options.character_coverage, "fraction of the text's characters the pieces cover")
        ->check(in_range(0.98, 1.0));
    t->add_flag("!--no-byte-fallback", options.byte_fallback, "map unknown characters to [UNK] instead of UTF-8 bytes");
    t->add_option("--max-sentences", options.max_sentences, "lines sampled for training")->check(positive());
    t->add_option("--threads", options.threads,
                  "SentencePiece's threads; the pieces' scores and ids depend on the count, so 0 is " +
                      std::to_string(tokenizer::TrainOptions::kTrainingThreads) +
                      " on every machine (the same tokenizer wherever it is trained)")
        ->check(non_negative());
    t->add_flag("--overwrite", overwrite, "replace a tokenizer already at --output");
    return t;
  }
  // SIGTERM/SIGINT end the training at once (SentencePiece's trainer runs in a child process), exit 3.
  tokenizer::Tokenizer train_stoppable() const {
    try {
      StopSignals signals;
      return data::train_tokenizer(options, data::parse_text_format(format), text_field);
    } catch (const Interrupted& e) {
      throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": nothing written (" + options.output + " is as it was)");
    }
  }
  // Under the output's lock: the folder `into`, an earlier tokenizer replaced only with --overwrite, the training.
  tokenizer::Tokenizer train_locked(const std::string& into) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    const OutputLock lock(options.output);  // one tokenizer training into --output at a time
    if (!into.empty()) make_output_directory(into);
    if (fs::is_directory(options.output, ec)) {
      check_input(overwrite || !tokenizer::Tokenizer::present(options.output),
                  "--output " + options.output + ": holds a tokenizer; give --overwrite to replace it");
    } else {
      check_output_file(options.output, overwrite);
    }
    return train_stoppable();
  }
  void run() {
    namespace fs = std::filesystem;
    // Inputs as encode reads them: plain text goes to SentencePiece's trainer as it is; JSONL's field,
    // Parquet's column and compressed text as their sentences (data::train_tokenizer).
    const std::vector<std::string> files = data::expand_inputs(options.inputs);
    for (const auto& in : files) check_readable_file(in);
    check_text_flags_apply(files, format, data::parse_text_format(format), text_field, text_field_given->count() > 0);
    options.inputs = files;  // listed and matched once
    options.family = tokenizer::parse_family(family);
    // A family that fixes the algorithm (Llama's BPE) refuses another, rather than ignore it.
    for (const auto& [key, value] : tokenizer::family_spec(options.family).training_arguments) {
      check_input(key != "model_type" || model_type->count() == 0 || value == options.model_type,
                  "--model-type " + options.model_type + ": the " + options.family + " family trains " + value);
    }
    // Its folders are made as encode's are: DIR itself, or PATH.model's folder. One that this command
    // made goes again when it fails or is stopped (once its lock is released, when it is empty).
    std::error_code ec;
    const bool model_file = fs::path(options.output).extension() == ".model";
    const std::string into = model_file ? fs::path(options.output).parent_path().string() : options.output;
    const bool made = !into.empty() && !fs::exists(into, ec);
    tokenizer::Tokenizer tok;
    try {
      tok = train_locked(into);
    } catch (...) {
      if (made) fs::remove(into, ec);  // only when empty
      throw;
    }
    std::printf("%s: %lld tokens (%s family; specials", options.output.c_str(), static_cast<long long>(tok.vocab_size()),
                family.c_str());
    // Every named special, the unknown piece included (it is not a control token, so special_ids() leaves it out).
    std::vector<int32_t> shown = tok.special_ids();
    if (tok.specials().unk >= 0 && std::find(shown.begin(), shown.end(), tok.specials().unk) == shown.end()) {
      shown.push_back(tok.specials().unk);
    }
    std::sort(shown.begin(), shown.end());
    for (int32_t id : shown) {
      if (id < 8) std::printf(" %s=%d", tok.piece(id).c_str(), id);
    }
    if (tok.specials().num_sentinels) std::printf(" + %d sentinels", tok.specials().num_sentinels);
    std::printf(")\n");
    const std::filesystem::path out(options.output);
    const std::string folder = std::filesystem::is_directory(out)        ? options.output
                               : out.parent_path().string().empty() ? "."
                                                                     : out.parent_path().string();
    std::printf("%s: loads in lmkit (--tokenizer %s) and in HuggingFace (AutoTokenizer.from_pretrained(\"%s\"))\n",
                options.output.c_str(), options.output.c_str(), folder.c_str());
  }
};

// lmkit-tokenize encode: text files into a token corpus directory.
struct EncodeCommand {
  std::string tokenizer_path, format = "auto", text_field = "text", output;
  std::vector<std::string> inputs;
  int threads = 0;
  bool overwrite = false;
  CLI::Option* text_field_given = nullptr;
  CLI::App* add(CLI::App& app) {
    auto* e = app.add_subcommand("encode", "encode text files into a token corpus directory");
    e->add_option("--tokenizer", tokenizer_path, "tokenizer directory, PATH.model or tokenizer.json")->required();
    e->add_option("--input", inputs, "text files (plain, .gz or .zst) or Parquet files with a text column, directories of "
                                     "them or quoted glob patterns ('shards/*.jsonl.zst'), read in name order")->required()->expected(1, -1);
    e->add_option("--output", output, "corpus directory to write")->required();
    e->add_option("--format", format, "auto, blank-line, lines or jsonl");
    text_field_given = e->add_option("--text-field", text_field, "JSONL field or Parquet column holding the text");
    e->add_flag("--overwrite", overwrite, "replace a token corpus already at --output");
    e->add_option("--threads", threads, "encoding threads (0: OMP_NUM_THREADS where set, else every core); the output does not depend on it")->check(non_negative());
    return e;
  }
  // Checked before the work: only an earlier corpus is replaced, and only with --overwrite
  // (a folder of the user's files given as --output was deleted).
  void check_output() const {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(output, ec))) return;
    if (!data::is_corpus(output)) {
      throw InputError("--output " + output + ": exists and is not a token corpus; lmkit replaces only its own corpora: "
                       "choose a new path");
    }
    check_input(overwrite, "--output " + output + ": a token corpus is already there; give --overwrite to replace it");
  }
  void run() const {
    const OutputLock lock(output);  // one writer of --output at a time
    check_output();
    const std::vector<std::string> files = data::expand_inputs(inputs);  // directories and patterns: their files
    for (const auto& in : files) check_readable_file(in);
    const data::TextFormat parsed = data::parse_text_format(format);
    check_text_flags_apply(files, format, parsed, text_field, text_field_given->count() > 0);
    const auto tok = tokenizer::Tokenizer::load(tokenizer_path);
    Json h;
    try {
      StopSignals signals;  // SIGTERM/SIGINT stop the encoding between documents (exit 3)
      h = data::encode_corpus(tok, {files, parsed, text_field, output, threads}, "encode");
    } catch (const Interrupted& e) {
      throw Error(ExitCode::kInterrupted, std::string(e.what()) + ": nothing written (" + output + " is as it was)");
    }
    std::printf("%s: %lld tokens, %lld sentences, %lld documents (%s)\n", output.c_str(),
                static_cast<long long>(h["tokens"].get<int64_t>()), static_cast<long long>(h["sentences"].get<int64_t>()),
                static_cast<long long>(h["documents"].get<int64_t>()), h["dtype"].get<std::string>().c_str());
  }
};

// lmkit-tokenize ids: each line's ids as JSON, as HF's tokenizer(text[, pair]) gives them.
struct IdsCommand {
  std::string tokenizer_path;
  std::vector<std::string> inputs;
  bool pairs = false, no_special = false, with_text = false;
  CLI::App* add(CLI::App& app) {
    auto* d = app.add_subcommand("ids", "print each line's token ids as JSON, as HF's tokenizer(text) gives them");
    d->add_option("--tokenizer", tokenizer_path, "tokenizer directory, PATH.model or tokenizer.json")->required();
    d->add_option("--input", inputs, "text files, one text per line (plain, .gz or .zst)")->required()->expected(1, -1);
    d->add_flag("--pairs", pairs, "each line is TEXT<TAB>PAIR: a text pair");
    d->add_flag("--no-special", no_special, "no special tokens (no template)");
    d->add_flag("--decode", with_text, "also give the ids decoded back to text (special tokens dropped)");
    return d;
  }
  Json line_ids(const tokenizer::Tokenizer& tok, std::string_view text, std::optional<std::string_view> pair) const {
    tokenizer::Encoding enc;
    if (no_special) {
      enc.ids = tok.encode(text);
      if (pair) {
        const auto b = tok.encode(*pair);
        enc.ids.insert(enc.ids.end(), b.begin(), b.end());
      }
    } else {
      enc = tok.encode_pair(text, pair);
    }
    Json j = {{"ids", enc.ids}};
    if (!no_special) j["type_ids"] = enc.type_ids;
    if (with_text) j["text"] = tok.decode(enc.ids);
    return j;
  }
  void run() const {
    const auto tok = tokenizer::Tokenizer::load(tokenizer_path);
    for (const auto& path : inputs) {
      const auto lines = data::read_text_lines(path);  // gzip or zstd decompressed; a binary file refused by name
      for (size_t n = 0; n < lines.size(); ++n) {
        std::string_view text = lines[n];
        std::optional<std::string_view> pair;
        if (pairs) {
          const size_t tab = text.find('\t');
          if (tab == std::string::npos) throw InputError(path + ":" + std::to_string(n + 1) + ": --pairs needs TEXT<TAB>PAIR");
          pair = text.substr(tab + 1), text = text.substr(0, tab);
        }
        std::printf("%s\n", line_ids(tok, text, pair).dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
      }
    }
  }
};

// lmkit-tokenize inspect: what a tokenizer is, or the batches an objective makes of a corpus.
struct InspectCommand {
  std::string tokenizer_path, corpus_path, objective, dump;
  int64_t seq_len = 128, batch_size = 4, batches = 2;
  uint64_t seed = 0;
  bool whole_word = false, span_masking = false, overwrite = false;
  CLI::App* add(CLI::App& app) {
    auto* i = app.add_subcommand("inspect", "say what a tokenizer is; with --corpus and --objective, print (and dump) batches");
    i->add_option("--tokenizer", tokenizer_path, "tokenizer directory, PATH.model or tokenizer.json")->required();
    auto* corpus_opt = i->add_option("--corpus", corpus_path, "corpus directory");
    i->add_option("--objective", objective, "a corpus objective: " + data::objective_names(/*corpus_only=*/true))
        ->needs(corpus_opt);
    corpus_opt->needs(i->get_option("--objective"));
    i->add_option("--seq-len", seq_len, "sequence (input) length")->check(positive());
    i->add_option("--batch-size", batch_size, "examples per batch")->check(positive());
    i->add_option("--batches", batches, "batches to show")->check(positive());
    i->add_option("--seed", seed, "shuffling and masking seed");
    i->add_flag("--whole-word", whole_word, "whole-word masking");
    i->add_flag("--span-masking", span_masking, "span masking of whole words (Joshi et al. 2020; mlm+sbo always uses it)");
    i->add_option("--dump", dump, "write the batches to a safetensors file");
    i->add_flag("--overwrite", overwrite, "replace the --dump file if it exists");
    return i;
  }
  void run() const {
    const auto tok = tokenizer::Tokenizer::load(tokenizer_path);
    if (corpus_path.empty()) return describe(tok);
    std::optional<OutputLock> dump_lock;  // one writer of --dump at a time
    if (!dump.empty()) dump_lock.emplace(dump, "--dump"), check_output_file(dump, overwrite, "--dump");
    auto corpus = std::make_shared<const data::Corpus>(corpus_path);
    corpus->check_tokenizer(tok);
    data::MaskingOptions masking;
    masking.whole_word = whole_word;
    masking.spans = span_masking;
    const data::ObjectiveSpec& obj = data::objective(objective);
    check_input(!obj.parallel_text, "objective " + objective + " reads parallel text, not a corpus");
    data::check_objective_tokenizer(obj, tok);
    data::ObjectiveInputs in;
    in.corpus = corpus;
    in.tokenizer = &tok;
    in.seq_len = seq_len;
    in.seed = seed;
    in.masking = masking;
    data::LoaderOptions lo;
    lo.batch_size = batch_size;
    lo.seed = seed;
    lo.pad_id = data::pad_id(tok);
    lo.pad_to = seq_len;
    lo.prefetch = 0;
    data::Loader loader(obj.dataset(in), lo);
    std::vector<Batch> all;
    for (int64_t k = 0; k < batches; ++k) {
      Batch b = loader.next();
      // Unpadded batches carry no mask (every position is real): render_row and the dump read one.
      if (!b.attention_mask.defined()) b.attention_mask = at::ones_like(b.input_ids);
      std::printf("batch %lld\n", static_cast<long long>(k));
      for (int64_t r = 0; r < b.input_ids.size(0); ++r) std::printf("  [%lld] %s\n", static_cast<long long>(r), render_row(tok, b, r, obj.num_classes).c_str());
      all.push_back(b);
    }
    if (!dump.empty()) write_dump(tok, all, obj);
  }
  // The batches, concatenated, as the tensors a model reads (T5: with decoder_input_ids).
  void write_dump(const tokenizer::Tokenizer& tok, const std::vector<Batch>& all, const data::ObjectiveSpec& obj) const {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    auto cat = [&](const char* name, at::Tensor Batch::*field) {
      std::vector<at::Tensor> parts;
      for (const auto& b : all) {
        if ((b.*field).defined()) parts.push_back(b.*field);
      }
      if (!parts.empty()) tensors.emplace_back(name, at::cat(parts, 0));
    };
    cat("input_ids", &Batch::input_ids);
    cat("attention_mask", &Batch::attention_mask);
    cat("token_type_ids", &Batch::token_type_ids);
    cat("labels", &Batch::labels);
    std::map<std::string, std::vector<at::Tensor>> extra;
    for (const auto& b : all) {
      for (const auto& [name, t] : b.extra) extra[name].push_back(t);
    }
    for (const auto& [name, parts] : extra) tensors.emplace_back(name, at::cat(parts, 0));
    if (obj.separate_targets) {  // what an encoder–decoder's decoder reads: it starts from pad (T5)
      at::Tensor labels;
      for (const auto& [name, tensor] : tensors) {
        if (name == "labels") labels = tensor;
      }
      tensors.emplace_back("decoder_input_ids", models::shift_right(labels, tok.specials().pad, tok.specials().pad));
    }
    // The special ids go in the metadata, so that the file is lmkit-forward's --inputs as it is.
    std::string specials;
    for (const int32_t id : tok.special_ids()) specials += (specials.empty() ? "" : ",") + std::to_string(id);
    io::write_safetensors(dump, tensors, {{"objective", objective}, {"seed", std::to_string(seed)}, {"special_ids", specials}});
    std::printf("%s: %zu tensors\n", dump.c_str(), tensors.size());
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = load_plugins(argc, argv)) return rc;
  CLI::App app("lmkit-tokenize: SentencePiece tokenizers, token corpora, and what the objectives make of them");
  app.require_subcommand(1);
  TrainCommand train;
  EncodeCommand encode;
  IdsCommand ids;
  InspectCommand inspect;
  CLI::App* t = train.add(app);
  CLI::App* e = encode.add(app);
  CLI::App* d = ids.add(app);
  CLI::App* i = inspect.add(app);
  return run_app(app, argc, argv, [&] {
    set_threads(0);
    if (t->parsed()) train.run();
    if (e->parsed()) encode.run();
    if (d->parsed()) ids.run();
    if (i->parsed()) inspect.run();
  });
}
