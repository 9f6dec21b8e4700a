// The tokenizer family table: what lmkit knows of each model family's tokenizer,
// one entry per family (special tokens, template, SentencePiece training arguments,
// the HuggingFace classes it reads). The Tokenizer asks its entry instead of
// switching on a family; adding a family is one entry in family_specs().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace lmkit::tokenizer {

struct SpecialTokens;
struct Template;

struct FamilySpec {
  std::string name;                  ///< bert, gpt2, t5, ...: what tokenizer.lmkit.json and --family say
  std::vector<std::string> aliases;  ///< other spellings --family accepts ("gpt")
  /// HF tokenizer_class names (substrings) and config.json model_types that mean this family.
  std::vector<std::string> hf_classes, hf_model_types;
  /// A piece whose presence identifies the family when no file names it ("[CLS]"); "" for the fallback.
  std::string detect_piece;
  /// Special tokens: (HF key, default piece), e.g. ("pad_token", "[PAD]"); a file's own names win.
  std::vector<std::pair<std::string, std::string>> specials;
  /// Keys that must resolve to an id, else the tokenizer is not of this family.
  std::vector<std::string> required;
  /// Keys read only when a file names them (GPT-2's pad_token: none by default).
  std::vector<std::string> optional;
  int32_t sentinels = 0;             ///< T5: 100 `<extra_id_i>` at the top of the vocabulary
  bool token_types = false;          ///< the model reads token_type_ids (model_input_names)
  std::string bos_key;               ///< the special that HF's bos_token names ("eos_token" for GPT-2), "" for none
  /// SentencePiece trainer arguments that place the special pieces.
  std::vector<std::pair<std::string, std::string>> training_arguments;
  /// The template encode_pair() applies when the files give none.
  std::function<Template(const SpecialTokens&)> make_template;
};

/// Every tokenizer family, in the order errors list them.
const std::vector<FamilySpec>& family_specs();
/// The entry called `name` (or one of its aliases); InputError listing them otherwise.
const FamilySpec& family_spec(const std::string& name);
/// The family an HF tokenizer_class names ("" when none does).
std::string family_of_class(const std::string& tokenizer_class);
/// The family an HF config.json model_type implies ("" when none does).
std::string family_of_model_type(const std::string& model_type);

}  // namespace lmkit::tokenizer
