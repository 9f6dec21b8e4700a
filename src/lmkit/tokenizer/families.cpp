#include "lmkit/tokenizer/families.h"

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tokenizer {

namespace {

using Item = Template::Item;

FamilySpec bert() {
  FamilySpec f;
  f.name = "bert";
  f.hf_classes = {"Bert"};
  f.hf_model_types = {"bert"};
  f.detect_piece = "[CLS]";
  f.specials = {{"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"},
                {"mask_token", "[MASK]"}};
  f.required = {"pad_token", "cls_token", "sep_token", "mask_token"};
  f.token_types = true;
  f.training_arguments = {{"pad_id", "0"}, {"pad_piece", "[PAD]"}, {"unk_id", "1"}, {"unk_piece", "[UNK]"},
                          {"eos_id", "-1"}, {"control_symbols", "[CLS],[SEP],[MASK]"}};
  f.make_template = [](const SpecialTokens& s) {
    Template t;
    t.single = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}};
    t.pair = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}, Item{-1, 1, 1}, Item{s.sep, 0, 1}};
    return t;
  };
  return f;
}

FamilySpec gpt2() {
  FamilySpec f;
  f.name = "gpt2";
  f.aliases = {"gpt"};
  f.hf_classes = {"GPT2"};
  f.hf_model_types = {"gpt2"};
  f.detect_piece = "<|endoftext|>";
  f.specials = {{"eos_token", "<|endoftext|>"}, {"unk_token", "<unk>"}};
  f.optional = {"pad_token"};
  f.required = {"eos_token"};
  f.bos_key = "eos_token";
  f.training_arguments = {{"unk_id", "0"}, {"eos_id", "1"}, {"eos_piece", "<|endoftext|>"}, {"pad_id", "-1"}};
  f.make_template = [](const SpecialTokens& s) {
    // As HF's GPT-2: nothing around one text; a pair is joined by <|endoftext|>.
    Template t;
    t.single = {Item{-1, 0, 0}};
    t.pair = {Item{-1, 0, 0}, Item{s.eos, 0, 0}, Item{-1, 1, 1}};
    return t;
  };
  return f;
}

FamilySpec roberta() {
  FamilySpec f;
  f.name = "roberta";
  f.hf_classes = {"Roberta", "Longformer"};
  f.hf_model_types = {"roberta", "longformer"};
  f.detect_piece = "<mask>";
  f.specials = {{"cls_token", "<s>"}, {"pad_token", "<pad>"}, {"sep_token", "</s>"}, {"eos_token", "</s>"},
                {"unk_token", "<unk>"}, {"mask_token", "<mask>"}};
  f.required = {"cls_token", "pad_token", "sep_token", "mask_token"};
  f.bos_key = "cls_token";
  f.training_arguments = {{"bos_id", "0"}, {"bos_piece", "<s>"}, {"pad_id", "1"}, {"pad_piece", "<pad>"},
                          {"eos_id", "2"}, {"eos_piece", "</s>"}, {"unk_id", "3"}, {"unk_piece", "<unk>"},
                          {"control_symbols", "<mask>"}};
  f.make_template = [](const SpecialTokens& s) {
    // HF's RobertaProcessing: <s> A </s>, and <s> A </s></s> B </s>, one token type.
    Template t;
    t.single = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}};
    t.pair = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}, Item{s.sep, 0, 0}, Item{-1, 1, 0}, Item{s.sep, 0, 0}};
    return t;
  };
  return f;
}

FamilySpec llama() {
  FamilySpec f;
  f.name = "llama";
  f.aliases = {"mistral"};
  f.hf_classes = {"Llama"};
  f.hf_model_types = {"llama", "mistral"};
  f.detect_piece = "<s>";
  f.specials = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  f.optional = {"pad_token"};
  f.required = {"bos_token", "eos_token"};
  f.bos_key = "bos_token";
  // Llama's SentencePiece BPE with byte fallback: <unk>=0 <s>=1 </s>=2, no pad.
  f.training_arguments = {{"model_type", "bpe"}, {"unk_id", "0"}, {"bos_id", "1"}, {"bos_piece", "<s>"},
                          {"eos_id", "2"}, {"eos_piece", "</s>"}, {"pad_id", "-1"}};
  f.make_template = [](const SpecialTokens& s) {
    // As HF's LlamaTokenizerFast (add_bos_token, no EOS): <s> A, and <s> A <s> B.
    Template t;
    t.single = {Item{s.bos, 0, 0}, Item{-1, 0, 0}};
    t.pair = {Item{s.bos, 0, 0}, Item{-1, 0, 0}, Item{s.bos, 0, 1}, Item{-1, 1, 1}};
    return t;
  };
  return f;
}

FamilySpec bloom() {
  FamilySpec f;
  f.name = "bloom";
  f.hf_classes = {"Bloom"};
  f.hf_model_types = {"bloom"};
  f.detect_piece = "<pad>";
  f.specials = {{"unk_token", "<unk>"}, {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"}};
  f.required = {"bos_token", "eos_token", "pad_token"};
  f.bos_key = "bos_token";
  // BLOOM's special ids, <unk>=0 <s>=1 </s>=2 <pad>=3, on SentencePiece BPE with byte fallback
  // (BLOOM's own is byte-level BPE, which lmkit reads but does not train).
  f.training_arguments = {{"model_type", "bpe"}, {"unk_id", "0"}, {"bos_id", "1"}, {"bos_piece", "<s>"},
                          {"eos_id", "2"}, {"eos_piece", "</s>"}, {"pad_id", "3"}, {"pad_piece", "<pad>"}};
  f.make_template = [](const SpecialTokens&) {
    // As BLOOM's tokenizer: nothing around one text or between the two of a pair.
    Template t;
    t.single = {Item{-1, 0, 0}};
    t.pair = {Item{-1, 0, 0}, Item{-1, 1, 0}};
    return t;
  };
  return f;
}

FamilySpec t5() {
  FamilySpec f;
  f.name = "t5";
  f.hf_classes = {"T5"};
  f.hf_model_types = {"t5"};
  f.detect_piece = "</s>";
  f.specials = {{"pad_token", "<pad>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  f.required = {"pad_token", "eos_token"};
  f.sentinels = 100;
  f.training_arguments = {{"pad_id", "0"}, {"eos_id", "1"}, {"unk_id", "2"}};
  f.make_template = [](const SpecialTokens& s) {
    Template t;
    t.single = {Item{-1, 0, 0}, Item{s.eos, 0, 0}};
    t.pair = {Item{-1, 0, 0}, Item{s.eos, 0, 0}, Item{-1, 1, 1}, Item{s.eos, 0, 1}};
    return t;
  };
  return f;
}

FamilySpec big_bird() {
  FamilySpec f;
  f.name = "big_bird";
  f.hf_classes = {"BigBird"};
  f.hf_model_types = {"big_bird"};
  f.detect_piece = "[CLS]";
  f.specials = {{"pad_token", "<pad>"}, {"eos_token", "</s>"}, {"bos_token", "<s>"}, {"unk_token", "<unk>"},
                {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"}};
  f.required = {"cls_token", "sep_token", "mask_token", "pad_token"};
  f.bos_key = "cls_token";
  // HF's BigBirdTokenizer: SentencePiece unigram, <pad>=0 </s>=1 <s>=2 <unk>=3 as its fresh vocabulary.
  f.training_arguments = {{"model_type", "unigram"}, {"pad_id", "0"}, {"pad_piece", "<pad>"}, {"eos_id", "1"},
                          {"eos_piece", "</s>"}, {"bos_id", "2"}, {"bos_piece", "<s>"}, {"unk_id", "3"},
                          {"unk_piece", "<unk>"}, {"control_symbols", "[CLS],[SEP],[MASK]"}};
  f.make_template = [](const SpecialTokens& s) {
    // As HF's BigBirdTokenizer: [CLS] A [SEP], and [CLS] A [SEP] B [SEP] with B's part type 1.
    Template t;
    t.single = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}};
    t.pair = {Item{s.cls, 0, 0}, Item{-1, 0, 0}, Item{s.sep, 0, 0}, Item{-1, 1, 1}, Item{s.sep, 0, 1}};
    return t;
  };
  return f;
}

}  // namespace

const std::vector<FamilySpec>& family_specs() {
  // Detection tries the entries in this order: more specific pieces first.
  static const std::vector<FamilySpec> all = {bert(), gpt2(), roberta(), llama(), t5(), bloom(), big_bird()};
  return all;
}

const FamilySpec& family_spec(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& f : family_specs()) {
    if (f.name == name) return f;
    for (const auto& alias : f.aliases) {
      if (alias == name) return f;
    }
    names.push_back(f.name);
  }
  throw InputError("unknown tokenizer family '" + name + "' (expected " + join_names(names, " or ") + ")");
}

std::string family_of_class(const std::string& cls) {
  for (const auto& f : family_specs()) {
    for (const auto& c : f.hf_classes) {
      if (cls.find(c) != std::string::npos) return f.name;
    }
  }
  return "";
}

std::string family_of_model_type(const std::string& type) {
  for (const auto& f : family_specs()) {
    for (const auto& t : f.hf_model_types) {
      if (t == type) return f.name;
    }
  }
  return "";
}

}  // namespace lmkit::tokenizer
