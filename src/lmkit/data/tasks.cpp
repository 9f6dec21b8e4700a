#include "lmkit/data/tasks.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

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

struct Record {
  int64_t line = 0;  ///< 1-based line where the record starts
  std::vector<std::string> fields;
};

// A delimited file's records: TSV splits lines on tabs without quoting; CSV follows
// RFC 4180 (quoted fields may hold the separator, "" for a quote, and line breaks).
// Blank lines are skipped; a line end is "\n" or "\r\n"; a UTF-8 byte-order mark is dropped.
std::vector<Record> read_records(const std::string& path, char sep) {
  const std::string text = read_text(path);  // .gz and .zst too, without a byte-order mark
  std::vector<Record> records;
  Record r{1, {std::string()}};
  int64_t line = 1;
  bool quoted = false, empty_line = true;
  auto end_record = [&] {
    if (!empty_line) records.push_back(std::move(r));
    r = Record{line, {std::string()}};
    empty_line = true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') r.fields.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else r.fields.back() += c;
      if (c == '\n') ++line;
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\n') {
      if (++line % 4096 == 0) check_stop(kPreparingExamples);  // a stop signal while a large file is read
      end_record();
      continue;
    }
    empty_line = false;
    if (c == '"' && sep != '\t') quoted = true;
    else if (c == sep) r.fields.emplace_back();
    else r.fields.back() += c;
  }
  if (quoted) throw InputError(path + ":" + std::to_string(r.line) + ": a quoted field is not closed");
  end_record();
  return records;
}

bool is_index(const std::string& s) {
  // ::isdigit on a plain (signed) char is undefined for bytes >= 0x80 (UTF-8 headers).
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A column given by 0-based index; one past any real file's width is an error here,
// not std::stoul's out_of_range.
size_t column_index(const std::string& s, const std::string& path) {
  if (s.size() > 6) throw InputError(path + ": column index " + s.substr(0, 40) + " is beyond any row's columns");
  return static_cast<size_t>(std::stoul(s));
}

// A label that reads as a finite number (1e999 does not: it is a name).
bool finite_number(const std::string& s, double* value = nullptr) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (value) *value = v;
  return !s.empty() && end && *end == '\0' && std::isfinite(v);
}

}  // namespace

std::vector<TextPair> read_parallel_files(const std::string& source_file, const std::string& target_file) {
  const auto src = read_text_lines(source_file), tgt = read_text_lines(target_file);
  if (src.size() != tgt.size()) {
    throw InputError(source_file + " has " + std::to_string(src.size()) + " lines but " + target_file + " has " +
                     std::to_string(tgt.size()) + ": parallel files must align line by line");
  }
  check_input(!src.empty(), source_file + ": empty parallel corpus");
  std::vector<TextPair> pairs;
  for (size_t i = 0; i < src.size(); ++i) pairs.push_back({src[i], tgt[i], static_cast<int64_t>(i + 1)});
  return pairs;
}

Seq2SeqDataset::Seq2SeqDataset(const std::string& source_file, const std::string& target_file,
                               const tokenizer::Tokenizer& tok, int64_t max_source_length, int64_t max_target_length) {
  Seq2SeqOptions o;
  o.max_source_length = max_source_length;
  o.max_target_length = max_target_length;
  o.require_targets = false;
  const int32_t eos = tok.specials().eos >= 0 ? tok.specials().eos : tok.specials().sep;
  for (const auto& pair : read_parallel_files(source_file, target_file)) add(pair, tok, o, eos, {});
}

Seq2SeqDataset::Seq2SeqDataset(const std::vector<TextPair>& pairs, const std::string& path, const tokenizer::Tokenizer& tok,
                               const Seq2SeqOptions& o)
    : decoder_only_(o.decoder_only) {
  check_input(!pairs.empty(), path + ": no examples");
  const int32_t eos = tok.specials().eos >= 0 ? tok.specials().eos : tok.specials().sep;
  check_input(eos >= 0, path + ": the tokenizer has no end-of-sequence token to end targets with");
  const std::vector<int32_t> separator = o.decoder_only ? tok.encode(o.separator) : std::vector<int32_t>{};
  check_input(!o.decoder_only || static_cast<int64_t>(separator.size()) < o.max_source_length,
              "the separator's " + std::to_string(separator.size()) + " tokens leave no room for a source in " +
                  std::to_string(o.max_source_length) + " (raise --max-length)");
  check_input(o.max_source_length >= 2 && o.max_target_length >= 2, "source and target lengths must be at least 2 tokens");
  for (const auto& pair : pairs) {
    if (o.require_targets && pair.target.find_first_not_of(" \t\r\n") == std::string::npos) {
      throw InputError(path + ":" + std::to_string(pair.line) + ": empty target");
    }
    add(pair, tok, o, eos, separator);
  }
}

void Seq2SeqDataset::add(const TextPair& pair, const tokenizer::Tokenizer& tok, const Seq2SeqOptions& o, int32_t eos,
                         const std::vector<int32_t>& separator) {
  check_stop(kPreparingExamples);
  // The source keeps its start; the encoder's EOS or the decoder-only separator always ends it.
  const size_t tail = o.decoder_only ? separator.size() : 1;
  auto source = tok.encode(o.source_prefix + pair.source);
  if (source.size() + tail > static_cast<size_t>(o.max_source_length)) {
    source.resize(static_cast<size_t>(o.max_source_length) - tail), ++truncated_sources_;
  }
  if (o.decoder_only) source.insert(source.end(), separator.begin(), separator.end());
  else source.push_back(eos);
  auto target = tok.encode(pair.target);
  if (target.size() + 1 > static_cast<size_t>(o.max_target_length)) {
    target.resize(static_cast<size_t>(o.max_target_length) - 1), ++truncated_targets_;
  }
  target.push_back(eos);
  prompts_.push_back(std::move(source));
  targets_.push_back(std::move(target));
  references_.push_back(pair.target);
}

Example Seq2SeqDataset::get(int64_t index, int64_t) const {
  const auto i = static_cast<size_t>(index);
  Example e;
  e.input_ids = prompts_[i];
  if (!decoder_only_) {
    e.labels = targets_[i];
    return e;
  }
  e.input_ids.insert(e.input_ids.end(), targets_[i].begin(), targets_[i].end());
  e.labels.assign(prompts_[i].size(), -100);
  e.labels.insert(e.labels.end(), targets_[i].begin(), targets_[i].end());
  return e;
}

namespace {

// JSONL lines or Parquet rows (rows.h).
std::vector<LabelledRow> read_json_rows(const std::string& path, const ColumnSpec& c) {
  std::vector<LabelledRow> rows;
  const bool want_pair = !c.text_pair.empty();
  // HF datasets write -1 for a ClassLabel with no label (GLUE's test splits hide theirs): no class.
  const bool class_label = class_labels(path).count(c.label) > 0;
  std::vector<std::string> fields = {c.text, c.label};
  if (want_pair) fields.push_back(c.text_pair);
  for_each_json_row(path, fields, [&](const Json& j, const RowPlace& place) {
    const std::string& where = place.where;
    auto field = [&](const std::string& name, bool label) -> std::string {
      if (!j.is_object() || !j.contains(name)) throw InputError(where + ": missing field '" + name + "'");
      const auto& v = j[name];
      if (v.is_string()) return v.get<std::string>();
      check_input(!(label && class_label && v == -1), where + ": label -1, a ClassLabel's 'no label' (HF datasets "
                                                              "write it for a split whose labels are hidden, as GLUE's test splits)");
      // A label may be a number; null, a boolean, a list or an object became a class of its own.
      if (label && v.is_number()) return v.dump();
      throw InputError(where + ": field '" + name + "' must be a string" + (label ? " or a number" : "") + ", got " + brief_json(v));
    };
    rows.push_back({field(c.text, false), want_pair ? field(c.text_pair, false) : "", field(c.label, true), place.number});
  });
  return rows;
}

// The column a name (or a 0-based index) picks in a header row.
size_t header_column(const std::vector<std::string>& header, const std::string& name, const std::string& path) {
  if (is_index(name)) return column_index(name, path);
  auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) {
    std::string cols;
    for (const auto& h : header) cols += (cols.empty() ? "" : ", ") + h;
    throw InputError(path + ":1: no column '" + name + "' (columns: " + cols + ")");
  }
  return static_cast<size_t>(it - header.begin());
}

void check_header(const std::vector<std::string>& header, const std::string& path) {
  for (size_t k = 0; k < header.size(); ++k) {
    const auto end = header.begin() + static_cast<std::ptrdiff_t>(k);
    if (std::find(header.begin(), end, header[k]) != end) {
      throw InputError(path + ":1: the header names column '" + header[k].substr(0, 40) + "' twice");
    }
  }
}

std::vector<LabelledRow> read_delimited_rows(const std::string& path, const ColumnSpec& c, const std::string& format) {
  const bool want_pair = !c.text_pair.empty();
  const auto records = read_records(path, format == "csv" ? ',' : '\t');
  check_input(!records.empty(), path + ": empty file");
  // Columns by index when every column is given as one; else by the header's names.
  const bool by_index = is_index(c.text) && is_index(c.label) && (!want_pair || is_index(c.text_pair));
  const size_t first = by_index ? 0 : 1;
  if (!by_index) check_header(records[0].fields, path);
  auto column = [&](const std::string& name) { return by_index ? column_index(name, path) : header_column(records[0].fields, name, path); };
  const size_t text_col = column(c.text), label_col = column(c.label), pair_col = want_pair ? column(c.text_pair) : 0;
  const size_t needed = std::max({text_col, label_col, pair_col}) + 1;
  // Every row as wide as the header (or the first row): an extra separator in a row
  // shifted its columns, and another column became its label.
  const size_t width = records[0].fields.size();
  std::vector<LabelledRow> rows;
  for (size_t i = first; i < records.size(); ++i) {
    const auto& f = records[i].fields;
    const std::string where = path + ":" + std::to_string(records[i].line);
    if (f.size() != width) {
      throw InputError(where + ": " + std::to_string(f.size()) + " columns, but " + (first ? "the header has " : "the first row has ") +
                       std::to_string(width) + (format == "tsv" ? " (a tab inside a text?)" : ""));
    }
    if (f.size() < needed) {
      throw InputError(where + ": " + std::to_string(f.size()) + " columns, expected at least " + std::to_string(needed));
    }
    rows.push_back({f[text_col], want_pair ? f[pair_col] : "", f[label_col], records[i].line});
  }
  return rows;
}

}  // namespace

std::vector<LabelledRow> read_labelled_rows(const std::string& path, const ColumnSpec& c) {
  std::string format = c.format;
  // Parquet (HF's train-00000-of-00001.parquet) and JSON lines are rows of named fields alike; train.csv.gz is CSV.
  if (format == "auto") format = json_rows(path) ? "jsonl" : ends_with(strip_compression_suffix(path), ".csv") ? "csv" : "tsv";
  check_input(format == "tsv" || format == "csv" || format == "jsonl", "unknown data format '" + format + "'");
  std::vector<LabelledRow> rows = format == "jsonl" ? read_json_rows(path, c) : read_delimited_rows(path, c, format);
  check_input(!rows.empty(), path + ": no labelled rows");
  return rows;
}

std::vector<TextPair> read_text_pairs(const std::string& path, const PairSpec& spec) {
  if (!spec.source_lang.empty() || !spec.target_lang.empty()) {
    check_input(!spec.source_lang.empty() && !spec.target_lang.empty(),
                "parallel files need both --source-lang and --target-lang");
    return read_parallel_files(path + "." + spec.source_lang, path + "." + spec.target_lang);
  }
  ColumnSpec columns;
  columns.text = spec.source;
  columns.label = spec.target;
  columns.format = spec.format;
  std::vector<TextPair> pairs;
  for (auto& row : read_labelled_rows(path, columns)) pairs.push_back({std::move(row.text), std::move(row.label), row.line});
  return pairs;
}

std::map<std::string, int64_t> make_label_map(const std::vector<LabelledRow>& rows, const std::string& path) {
  std::set<std::string> labels;
  for (const auto& r : rows) labels.insert(r.label);
  std::vector<std::string> sorted(labels.begin(), labels.end());
  // Numbers in numeric order (2 before 10), as long as every label is a finite number.
  const bool numeric = std::all_of(sorted.begin(), sorted.end(), [](const std::string& s) { return finite_number(s); });
  if (numeric) {
    std::stable_sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) {
      double x = 0, y = 0;
      finite_number(a, &x), finite_number(b, &y);
      return x < y;
    });
    // "1", "1.0" and "1e0" are one number: as three classes they would split one label silently.
    for (size_t i = 1; i < sorted.size(); ++i) {
      double x = 0, y = 0;
      finite_number(sorted[i - 1], &x), finite_number(sorted[i], &y);
      if (x != y) continue;
      int64_t line = 0;
      for (const auto& r : rows) {
        if (r.label == sorted[i]) line = line ? line : r.line;
      }
      throw InputError(path + ":" + std::to_string(line) + ": labels '" + sorted[i - 1] + "' and '" + sorted[i] +
                       "' are one number written two ways: write each class one way");
    }
  }
  std::map<std::string, int64_t> map;
  for (size_t i = 0; i < sorted.size(); ++i) map[sorted[i]] = static_cast<int64_t>(i);
  return map;
}

std::map<std::string, int64_t> load_label_map(const std::string& dir, int64_t num_labels) {
  const std::string file = dir + "/label_map.json", config = dir + "/config.json";
  std::map<std::string, int64_t> map;
  std::string source = file;
  if (std::filesystem::exists(file)) {
    const Json j = load_json_file(file);
    if (!j.is_object()) throw InputError(file + ": expected an object mapping label strings to class ids");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer()) {
        throw InputError(file + ": label '" + it.key() + "' maps to " + brief_json(it.value()) + ", not a class id");
      }
      map[it.key()] = it.value().get<int64_t>();
    }
  } else if (num_labels > 1) {
    source = config + " (id2label; there is no label_map.json)";
    const Json j = load_json_file(config);
    const Json id2label = j.value("id2label", Json::object());
    for (auto it = id2label.begin(); it != id2label.end(); ++it) {
      if (!is_index(it.key()) || it.key().size() > 9 || !it.value().is_string()) {
        throw InputError(config + ": id2label entry " + brief_json(Json{{it.key(), it.value()}}) + " is not \"id\": \"name\"");
      }
      if (!map.emplace(it.value().get<std::string>(), std::stoll(it.key())).second) {
        throw InputError(config + ": id2label names '" + it.value().get<std::string>() + "' twice");
      }
    }
    // HF's placeholder names say nothing about which data label is which class.
    if (std::all_of(map.begin(), map.end(), [](const auto& e) { return e.first == "LABEL_" + std::to_string(e.second); })) {
      throw InputError(dir + ": no label_map.json (lmkit-finetune writes one) and config.json's id2label holds only "
                       "the placeholder names LABEL_0.. : which data label is which class is unknown");
    }
  }
  if (num_labels == 1) {
    if (!map.empty()) {
      throw InputError(file + ": the model has a regression head (one output) but the file maps " +
                       std::to_string(map.size()) + " labels");
    }
    return map;
  }
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(num_labels, 0)), false);
  for (const auto& [label, id] : map) {
    if (id < 0 || id >= num_labels || seen[static_cast<size_t>(id)]) {
      throw InputError(source + ": label '" + label + "' maps to class " + std::to_string(id) + ", but the model has " +
                       std::to_string(num_labels) + " classes, each named once (0.." + std::to_string(num_labels - 1) + ")");
    }
    seen[static_cast<size_t>(id)] = true;
  }
  if (static_cast<int64_t>(map.size()) != num_labels) {
    throw InputError(source + ": names " + std::to_string(map.size()) + " labels but the model has " +
                     std::to_string(num_labels) + " classes");
  }
  return map;
}

ClassificationDataset::ClassificationDataset(const std::string& path, const ColumnSpec& columns,
                                             const tokenizer::Tokenizer& tok, int64_t max_length,
                                             const std::map<std::string, int64_t>& label_map, int64_t max_rows) {
  check_input(max_length >= 4, "--max-length must be at least 4");
  const bool token_types = tok.family_spec().token_types;  // the model reads segment ids (BERT)
  auto rows = read_labelled_rows(path, columns);
  if (max_rows > 0 && rows.size() > static_cast<size_t>(max_rows)) rows.resize(static_cast<size_t>(max_rows));
  for (const auto& row : rows) {
    check_stop(kPreparingExamples);  // SIGTERM under StopSignals (lmkit-finetune, -evaluate)
    Example e;
    if (columns.regression) {
      char* end = nullptr;
      e.target = std::strtod(row.label.c_str(), &end);
      if (row.label.empty() || *end != '\0' || !std::isfinite(e.target)) {
        throw InputError(path + ":" + std::to_string(row.line) + ": label '" + row.label + "' is not a number");
      }
    } else {
      auto it = label_map.find(row.label);
      if (it == label_map.end()) {
        throw InputError(path + ":" + std::to_string(row.line) + ": label '" + row.label + "' is not in the label map");
      }
      e.class_label = it->second;
    }
    // The tokenizer's own template ([CLS] A [SEP] B [SEP], A </s>, ...), as HF's
    // tokenizer(text, pair) builds it; the longer text loses tokens first (HF's longest_first).
    const bool pair = !columns.text_pair.empty();
    auto a = tok.encode(row.text);
    auto b = pair ? tok.encode(row.text_pair) : std::vector<int32_t>{};
    const int64_t budget = max_length - tok.post_processor().added(pair);
    check_input(budget >= 1, "--max-length " + std::to_string(max_length) + " leaves no room beside the special tokens");
    while (static_cast<int64_t>(a.size() + b.size()) > budget) (a.size() >= b.size() ? a : b).pop_back();
    tokenizer::Encoding enc = tok.apply_template(a, pair ? &b : nullptr);
    e.input_ids.assign(enc.ids.begin(), enc.ids.end());
    if (token_types) e.token_type_ids.assign(enc.type_ids.begin(), enc.type_ids.end());
    examples_.push_back(std::move(e));
  }
}

}  // namespace lmkit::data
