#include "lmkit/data/token_tasks.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/rows.h"
#include "lmkit/data/text_input.h"
#include "lmkit/tokenizer/families.h"

namespace lmkit::data {
namespace {

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// CoNLL: a word a line (columns split at whitespace, the word first), sentences between blank lines.
std::vector<TaggedSentence> read_conll(const std::string& path, int64_t tag_column) {
  std::vector<TaggedSentence> out;
  TaggedSentence s;
  const auto lines = read_text_lines(path);
  auto close = [&] {
    if (!s.words.empty()) out.push_back(std::move(s));
    s = TaggedSentence();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 1);
    if (blank(lines[i])) {
      close();
      continue;
    }
    std::istringstream in(lines[i]);
    std::vector<std::string> columns;
    for (std::string c; in >> c;) columns.push_back(c);
    if (columns[0] == "-DOCSTART-") continue;
    const size_t needed = tag_column < 0 ? 2 : static_cast<size_t>(tag_column) + 1;
    if (columns.size() < needed) {
      throw InputError(where + ": " + std::to_string(columns.size()) + " column(s), expected at least " + std::to_string(needed) +
                       (tag_column < 0 ? " (the word and its tag)" : " (the tag is column " + std::to_string(tag_column) + ")"));
    }
    if (s.words.empty()) s.line = static_cast<int64_t>(i + 1);
    s.words.push_back(columns[0]);
    s.word_lines.push_back(static_cast<int64_t>(i + 1));
    s.tags.push_back(tag_column < 0 ? columns.back() : columns[static_cast<size_t>(tag_column)]);
  }
  close();
  return out;
}

// A JSONL field holding a list of strings. With `ids` (the tags), integers are HF datasets'
// ClassLabel ids: named through `ids` (--label-names), refused without them.
std::vector<std::string> string_list(const Json& j, const std::string& key, const std::string& where,
                                     const std::vector<std::string>* ids = nullptr) {
  if (!j.is_object() || !j.contains(key)) throw InputError(where + ": missing field '" + key + "'");
  if (!j[key].is_array()) throw InputError(where + ": field '" + key + "' must be a list, got " + brief_json(j[key]));
  std::vector<std::string> out;
  for (const auto& v : j[key]) {
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
    } else if (ids && v.is_number_unsigned()) {
      check_input(!ids->empty(), where + ": tag " + v.dump() + " in '" + key + "' is a number (a ClassLabel id): give " +
                                     "--label-names FILE with the tag names in id order, one a line");
      check_input(v.get<uint64_t>() < ids->size(), where + ": tag " + v.dump() + " is past the " +
                                                       std::to_string(ids->size()) + " names of --label-names");
      out.push_back((*ids)[v.get<size_t>()]);
    } else {
      throw InputError(where + ": field '" + key + "' holds " + brief_json(v) + ", not a string");
    }
  }
  return out;
}

// JSONL lines or Parquet rows (rows.h); a Parquet file's ClassLabel names its integer tags where
// --label-names does not.
std::vector<TaggedSentence> read_tagged_jsonl(const std::string& path, const TaggedFormat& f) {
  std::vector<TaggedSentence> out;
  const auto recorded = class_labels(path);
  const auto names = f.label_names.empty() && recorded.count(f.tags_field) ? recorded.at(f.tags_field) : f.label_names;
  for_each_json_row(path, {f.tokens_field, f.tags_field}, [&](const Json& j, const RowPlace& place) {
    const std::string& where = place.where;
    TaggedSentence s;
    s.words = string_list(j, f.tokens_field, where);
    s.tags = string_list(j, f.tags_field, where, &names);
    s.line = place.number;
    if (s.words.size() != s.tags.size()) {
      throw InputError(where + ": " + std::to_string(s.words.size()) + " " + f.tokens_field + " but " +
                       std::to_string(s.tags.size()) + " " + f.tags_field);
    }
    for (const auto& w : s.words) check_input(!w.empty() && !blank(w), where + ": an empty word");
    if (!s.words.empty()) out.push_back(std::move(s));
  });
  return out;
}

}  // namespace

void set_tag_source(TaggedFormat& f, const std::string& label) {
  const bool index = !label.empty() && label.find_first_not_of("0123456789") == std::string::npos;
  if (!index) {
    f.tags_field = label;
    return;
  }
  check_input(label.size() < 6 && std::stoll(label) >= 1, "--label-column " + label + ": the tag column of a CoNLL file "
              "is 1 or more (column 0 is the word)");
  f.tag_column = std::stoll(label);
}

std::vector<TaggedSentence> read_tagged_sentences(const std::string& path, const TaggedFormat& f) {
  std::string format = f.format;
  if (format == "auto") format = json_rows(path) ? "jsonl" : "conll";
  check_input(format == "conll" || format == "jsonl", "unknown token-classification format '" + format + "' (conll or jsonl)");
  auto out = format == "jsonl" ? read_tagged_jsonl(path, f) : read_conll(path, f.tag_column);
  check_input(!out.empty(), path + ": no tagged sentences");
  return out;
}

std::map<std::string, int64_t> make_tag_map(const std::vector<TaggedSentence>& sentences) {
  std::set<std::string> tags;
  for (const auto& s : sentences) tags.insert(s.tags.begin(), s.tags.end());
  std::map<std::string, int64_t> out;
  for (const auto& t : tags) out.emplace(t, static_cast<int64_t>(out.size()));
  return out;
}

std::vector<int32_t> encode_word(const tokenizer::Tokenizer& tok, const std::string& word) {
  std::vector<int32_t> ids = tok.encode(tok.format() == "byte-level-bpe" ? " " + word : word);
  // A word the normaliser erases entirely (a zero-width character) is unknown, not dropped.
  if (ids.empty() && tok.specials().unk >= 0) ids.push_back(tok.specials().unk);
  return ids;
}

namespace {

// The tag each subword after a word's first carries with label_all_subwords: B-X becomes I-X (HF run_ner's b_to_i_label).
std::vector<int64_t> continuation_tags(const std::map<std::string, int64_t>& tag_map) {
  std::vector<int64_t> out(tag_map.size());
  for (const auto& [tag, id] : tag_map) {
    out[static_cast<size_t>(id)] = id;
    if (tag.rfind("B-", 0) == 0) {
      auto inside = tag_map.find("I-" + tag.substr(2));
      if (inside != tag_map.end()) out[static_cast<size_t>(id)] = inside->second;
    }
  }
  return out;
}

// Where sequence A starts in the template (after [CLS] or <s>).
int64_t sequence_offset(const tokenizer::Template& t) {
  int64_t offset = 0;
  for (const auto& item : t.single) {
    if (item.id < 0) break;
    ++offset;
  }
  return offset;
}

}  // namespace

TokenClassificationDataset::TokenClassificationDataset(std::vector<TaggedSentence> sentences, const std::string& path,
                                                       const tokenizer::Tokenizer& tok,
                                                       const std::map<std::string, int64_t>& tag_map,
                                                       const TokenTaskOptions& o)
    : sentences_(std::move(sentences)) {
  const int64_t budget = o.max_length - tok.post_processor().added(false);
  check_input(budget >= 1, o.length_flag + " " + std::to_string(o.max_length) + " leaves no room beside the special tokens");
  const bool token_types = tok.family_spec().token_types;
  const int64_t offset = sequence_offset(tok.post_processor());
  const std::vector<int64_t> continued = continuation_tags(tag_map);
  for (size_t si = 0; si < sentences_.size(); ++si) {
    check_stop(kPreparingExamples);
    const TaggedSentence& s = sentences_[si];
    std::vector<std::vector<int32_t>> pieces;
    std::vector<int64_t> tags;
    for (size_t w = 0; w < s.words.size(); ++w) {
      auto it = tag_map.find(s.tags[w]);
      if (it == tag_map.end()) {
        throw InputError(path + ":" + std::to_string(s.line_of(w)) + ": tag '" + s.tags[w] + "' (word '" + s.words[w] + "') is not among the training tags");
      }
      tags.push_back(it->second);
      pieces.push_back(encode_word(tok, s.words[w]));
      if (static_cast<int64_t>(pieces.back().size()) > budget) {
        throw InputError(path + ":" + std::to_string(s.line_of(w)) + ": the word '" + s.words[w].substr(0, 60) + "' is " + std::to_string(pieces.back().size()) +
                         " subwords; " + o.length_flag + " " + std::to_string(o.max_length) + " leaves " + std::to_string(budget) +
                         " per window");
      }
    }
    // Windows of whole words, each as long as the budget allows.
    for (size_t first = 0; first < pieces.size();) {
      WordWindow window;
      window.sentence = static_cast<int64_t>(si);
      window.first_word = static_cast<int64_t>(first);
      std::vector<int32_t> ids;
      std::vector<int32_t> labels;
      size_t w = first;
      for (; w < pieces.size() && static_cast<int64_t>(ids.size() + pieces[w].size()) <= budget; ++w) {
        window.positions.push_back(offset + static_cast<int64_t>(ids.size()));
        for (size_t k = 0; k < pieces[w].size(); ++k) {
          labels.push_back(k == 0 ? static_cast<int32_t>(tags[w])
                                  : o.label_all_subwords ? static_cast<int32_t>(continued[static_cast<size_t>(tags[w])]) : -100);
        }
        ids.insert(ids.end(), pieces[w].begin(), pieces[w].end());
      }
      const tokenizer::Encoding enc = tok.apply_template(ids);
      Example e;
      e.input_ids.assign(enc.ids.begin(), enc.ids.end());
      if (token_types) e.token_type_ids.assign(enc.type_ids.begin(), enc.type_ids.end());
      e.labels.assign(e.input_ids.size(), -100);
      std::copy(labels.begin(), labels.end(), e.labels.begin() + offset);
      examples_.push_back(std::move(e));
      windows_.push_back(std::move(window));
      first = w;
    }
  }
}

}  // namespace lmkit::data
