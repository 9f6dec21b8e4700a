// transformers' slow-tokenizer directories: BERT's vocab.txt (WordPiece) and
// GPT-2's vocab.json + merges.txt (byte-level BPE), with the configs beside them.
#include <algorithm>
#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/hf.h"
#include "lmkit/tokenizer/hf_schema.h"

namespace fs = std::filesystem;

namespace lmkit::tokenizer {
namespace {

// One piece per line; the line number is the id.
std::shared_ptr<const Backend> read_vocab_txt(const fs::path& dir, const Json& names) {
  const std::string d = dir.string();
  std::vector<std::string> vocab;
  std::ifstream in(dir / "vocab.txt");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab.push_back(line);
  }
  check_input(!vocab.empty(), d + "/vocab.txt: empty vocabulary");
  WordPieceOptions o;
  o.lowercase = hf::flag(names, "do_lower_case", true, d + "/tokenizer_config.json");
  o.strip_accents = names.contains("strip_accents") && names["strip_accents"].is_boolean() ? names["strip_accents"].get<bool>() : o.lowercase;
  o.handle_chinese_chars = hf::flag(names, "tokenize_chinese_chars", true, d + "/tokenizer_config.json");
  o.unk_token = names.contains("unk_token") && names["unk_token"].is_string() ? names["unk_token"].get<std::string>() : "[UNK]";
  return make_wordpiece(vocab, o);
}

std::shared_ptr<const Backend> read_vocab_json_merges(const fs::path& dir, const Json& names) {
  const std::string d = dir.string();
  check_input(fs::exists(dir / "vocab.json"), d + ": merges.txt without vocab.json");
  check_input(fs::exists(dir / "merges.txt"), d + ": vocab.json without merges.txt (a BPE tokenizer needs its merges)");
  const std::string vocab_path = (dir / "vocab.json").string();
  const Json vocab = load_json_file(vocab_path);
  std::vector<std::pair<std::string, std::string>> merges;
  std::ifstream in(dir / "merges.txt");
  size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= line.size()) {
      throw InputError(d + "/merges.txt:" + std::to_string(line_no) + ": not two tokens separated by a space");
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  BpeOptions o;
  o.add_prefix_space = hf::flag(names, "add_prefix_space", false, d + "/tokenizer_config.json");
  return make_byte_level_bpe(hf::vocab_by_id(vocab, vocab_path), merges, o);
}

// Every HF file of the directory, kept verbatim; the checksum covers the model's own files.
void keep_files(const fs::path& dir, std::initializer_list<const char*> model_files, TokenizerParts& t) {
  std::string all;
  for (const auto& name : hf::directory_files()) {
    if (!fs::is_regular_file(dir / name)) continue;
    t.hf_files.emplace_back(name, read_file((dir / name).string()));
    for (const char* f : model_files) {
      if (name == f) all += name + '\0' + t.hf_files.back().second;
    }
  }
  t.checksum = fnv1a64(all);
}

// transformers' defaults for the special tokens the config does not name, and the
// special tokens it names registered as added tokens.
void name_special_tokens(TokenizerParts& t, Json names) {
  const bool wordpiece = t.backend->format() == "wordpiece";
  const std::vector<std::pair<const char*, const char*>> defaults =
      wordpiece ? std::vector<std::pair<const char*, const char*>>{{"pad_token", "[PAD]"}, {"unk_token", "[UNK]"},
                                                                   {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"},
                                                                   {"mask_token", "[MASK]"}}
                : std::vector<std::pair<const char*, const char*>>{{"eos_token", "<|endoftext|>"}, {"bos_token", "<|endoftext|>"},
                                                                   {"unk_token", "<|endoftext|>"}};
  for (const auto& [key, value] : defaults) {
    if (!names.contains(key) && t.backend->id_of(value) >= 0) names[key] = value;
  }
  for (const auto& [key, value] : names.items()) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0 && value.is_string()) {
      const int32_t id = t.backend->id_of(value.get<std::string>());
      const bool seen = std::any_of(t.added.begin(), t.added.end(), [&](const AddedToken& a) { return a.id == id; });
      if (id >= 0 && !seen) t.added.push_back({value.get<std::string>(), id});
    }
  }
  t.special_names = std::move(names);
}

}  // namespace

std::optional<TokenizerParts> read_vocabulary_directory(const fs::path& dir) {
  const bool wordpiece = fs::exists(dir / "vocab.txt");
  if (!wordpiece && !fs::exists(dir / "vocab.json") && !fs::exists(dir / "merges.txt")) return std::nullopt;
  const std::string d = dir.string();
  Json names = hf::read_config(dir);
  TokenizerParts t;
  if (wordpiece) {
    t.backend = read_vocab_txt(dir, names);
    t.source = d + "/vocab.txt";
    keep_files(dir, {"vocab.txt"}, t);
  } else {
    t.backend = read_vocab_json_merges(dir, names);
    t.source = d + "/vocab.json + merges.txt";
    keep_files(dir, {"vocab.json", "merges.txt"}, t);
    // GPT-2's slow layout has no post-processor: a pair is A then B, nothing added.
    Template pp;
    pp.single = {Template::Item{-1, 0, 0}};
    pp.pair = {Template::Item{-1, 0, 0}, Template::Item{-1, 1, 1}};
    t.post_processor = pp;
  }
  t.clean_up_spaces = hf::flag(names, "clean_up_tokenization_spaces", false, d + "/tokenizer_config.json");
  name_special_tokens(t, std::move(names));
  return t;
}

}  // namespace lmkit::tokenizer
