// HuggingFace's tokenizer files and lmkit's own SentencePiece files, read into
// TokenizerParts (Tokenizer::assemble() makes the tokenizer), and the files that
// let AutoTokenizer load a SentencePiece model lmkit trained. One job a file:
//   hf_json.cpp    tokenizer.json (the tokenizers library's schema)
//   hf_vocab.cpp   the older vocab.txt and vocab.json + merges.txt directories
//   spm_files.cpp  SentencePiece .model files (lmkit's, T5's spiece.model)
//   hf_export.cpp  tokenizer.json / tokenizer_config.json for lmkit's SentencePiece models
//   hf_schema.cpp  what they share: transformers' configs, JSON helpers
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "lmkit/core/config.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tokenizer {

/// A tokenizer.json file; a directory's (named tokenizer.json) also reads the configs beside it.
TokenizerParts read_tokenizer_json(const std::filesystem::path& file);
/// A directory in transformers' slow layouts: vocab.txt (WordPiece) or vocab.json +
/// merges.txt (byte-level BPE); nullopt when it holds neither.
std::optional<TokenizerParts> read_vocabulary_directory(const std::filesystem::path& dir);
/// A SentencePiece .model file, with PATH.lmkit.json or transformers' configs beside it.
TokenizerParts read_sentencepiece_file(const std::filesystem::path& file);

/// tokenizer.json, tokenizer_config.json and special_tokens_map.json contents.
struct HfFiles {
  Json tokenizer, config, special_tokens_map;
};
/// What HF needs to load a SentencePiece tokenizer lmkit trained; `model_file` is its name in the folder.
HfFiles export_sentencepiece(const Tokenizer& tok, const std::string& model_file);

}  // namespace lmkit::tokenizer
