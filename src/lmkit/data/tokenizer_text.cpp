#include "lmkit/data/tokenizer_text.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/parquet.h"
#include "lmkit/data/text_input.h"

namespace lmkit::data {
namespace fs = std::filesystem;

namespace {

// SplitMix64: the sample's draws, from a fixed seed (the same inputs give the same sample).
struct SplitMix64 {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// Removes a file when it goes out of scope (the scratch text, on success and on every error).
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    std::error_code ec;
    if (!path.empty()) fs::remove(path, ec);
  }
};

}  // namespace

bool trainer_reads_directly(const std::string& path, TextFormat format) {
  if (is_parquet_file(path)) return false;
  const std::optional<TextFormat> resolved = resolve_format(path, format);
  // sniff_text_file refuses what is not text at all (NUL bytes, archives) by name.
  if (!resolved || *resolved == TextFormat::kJsonl || sniff_text_file(path) != Compression::kNone) return false;
  // What the readers leave out and the trainer would learn as characters: a byte-order mark, and
  // Windows line ends' '\r' (a piece of its own). The first 64 KiB decide, as the format's sniff does.
  std::string head(64 * 1024, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return !starts_with_byte_order_mark(head) && head.find('\r') == std::string::npos;
}

int64_t write_training_sentences(const std::vector<std::string>& inputs, TextFormat format, const std::string& text_field,
                                 int64_t max_sentences, const std::string& path) {
  check_input(max_sentences > 0, "tokenizer training: --max-sentences must be positive");
  // The sample: (position in the input, sentence); all of them while there are no more than max_sentences.
  std::vector<std::pair<int64_t, std::string>> kept;
  SplitMix64 rng;
  int64_t seen = 0;
  for (const auto& input : inputs) {
    for_each_document(input, format, text_field, [&](Document&& d) {
      check_stop("tokenizer training");
      for (auto& sentence : d.sentences) {
        if (static_cast<int64_t>(kept.size()) < max_sentences) {
          kept.emplace_back(seen, std::move(sentence));
        } else {
          const uint64_t j = rng.next() % static_cast<uint64_t>(seen + 1);  // Algorithm R
          if (j < static_cast<uint64_t>(max_sentences)) kept[j] = {seen, std::move(sentence)};
        }
        ++seen;
      }
    });
  }
  check_input(seen > 0, join_names(inputs) + ": no text to train a tokenizer on");
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  AtomicFile out(path);  // a write that fails (a full disk) says so and leaves no part behind
  std::string chunk;
  for (auto& entry : kept) {
    chunk += entry.second, chunk += '\n';
    std::string().swap(entry.second);
    if (chunk.size() >= (size_t{1} << 22)) out.write(chunk), chunk.clear();
  }
  out.write(chunk);
  out.commit();
  return seen;
}

tokenizer::Tokenizer train_tokenizer(tokenizer::TrainOptions options, TextFormat format, const std::string& text_field) {
  options.inputs = expand_inputs(options.inputs);
  const bool direct = std::all_of(options.inputs.begin(), options.inputs.end(),
                                  [&](const std::string& in) { return trainer_reads_directly(in, format); });
  if (direct) return tokenizer::Tokenizer::train(options);
  check_input(!options.output.empty(), "--output must name a directory or a .model file");
  const fs::path model = ends_with(options.output, ".model") ? fs::path(options.output)
                                                             : fs::path(options.output) / "tokenizer.model";
  const fs::path folder = model.parent_path().empty() ? fs::path(".") : model.parent_path();
  fs::create_directories(folder);
  RemoveOnExit scratch{(folder / ("." + model.filename().string() + ".text.tmp" + std::to_string(::getpid()))).string()};
  write_training_sentences(options.inputs, format, text_field, options.max_sentences, scratch.path);
  options.inputs = {scratch.path};
  return tokenizer::Tokenizer::train(options);
}

}  // namespace lmkit::data
