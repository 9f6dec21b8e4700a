// HuggingFace's tokenizer files: reading tokenizer.json / vocab.txt /
// vocab.json + merges.txt / spiece.model directories into a Tokenizer, and
// writing the files that let AutoTokenizer load lmkit's SentencePiece models.
#pragma once

#include <filesystem>
#include <optional>

#include "lmkit/core/config.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tokenizer {

/// tokenizer.json, tokenizer_config.json and special_tokens_map.json contents.
struct HfFiles {
  Json tokenizer, config, special_tokens_map;
};

struct HfLoader {
  static Tokenizer load_directory(const std::filesystem::path& dir, std::optional<Family> family);
  static Tokenizer load_tokenizer_json(const std::filesystem::path& file, std::optional<Family> family);
  static Tokenizer load_sentencepiece_file(const std::filesystem::path& file, std::optional<Family> family);
  /// What HF needs to load a SentencePiece tokenizer lmkit trained; `model_file` is its name in the folder.
  static HfFiles export_sentencepiece(const Tokenizer& tok, const std::string& model_file);
};

}  // namespace lmkit::tokenizer
