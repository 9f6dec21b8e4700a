#include "lmkit/data/text.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/data/parquet.h"
#include "lmkit/data/text_input.h"

namespace lmkit::data {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

void add_paragraph(Document& doc, std::string_view paragraph) {
  for (auto& s : split_sentences(paragraph)) doc.sentences.push_back(std::move(s));
}

}  // namespace

const NameTable<TextFormat>& text_format_names() {
  static const NameTable<TextFormat> table{"text format", {{"auto", TextFormat::kAuto},
                                                           {"blank-line", TextFormat::kBlankLine},
                                                           {"lines", TextFormat::kLines},
                                                           {"jsonl", TextFormat::kJsonl}}};
  return table;
}

TextFormat parse_text_format(const std::string& name) { return text_format_names().parse(name); }

bool is_wikitext_title(std::string_view line) {
  std::string_view t = trim(line);
  return t.size() >= 5 && t.substr(0, 2) == "= " && t.substr(t.size() - 2) == " =" && t[2] != '=';
}

std::vector<std::string> split_sentences(std::string_view p) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t j = i + 1;
    while (j < p.size() && (p[j] == '"' || p[j] == '\'' || p[j] == ')' || p[j] == ']')) ++j;
    if (j >= p.size() || !std::isspace(static_cast<unsigned char>(p[j]))) continue;
    size_t k = j;
    while (k < p.size() && std::isspace(static_cast<unsigned char>(p[k]))) ++k;
    if (k >= p.size()) break;
    const unsigned char next = static_cast<unsigned char>(p[k]);
    if (std::isupper(next) || std::isdigit(next) || next == '"' || next == '\'' || next == '(' || next >= 0x80) {
      std::string_view s = trim(p.substr(start, j - start));
      if (!s.empty()) out.emplace_back(s);
      start = k;
      i = k - 1;
    }
  }
  std::string_view rest = trim(p.substr(std::min(start, p.size())));
  if (!rest.empty()) out.emplace_back(rest);
  return out;
}

namespace {

// A document's text: paragraphs separated by newlines, each split into sentences.
Document document_of(std::string_view text) {
  Document doc;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    add_paragraph(doc, text.substr(pos, end - pos));
    pos = end + 1;
  }
  return doc;
}

// Hands the document of `text` (a JSONL field, a Parquet value) on, unless it holds no sentence.
void emit_text(std::string_view text, const std::function<void(Document&&)>& document) {
  Document doc = document_of(text);
  if (!doc.sentences.empty()) document(std::move(doc));
}

// Reports `bytes` read of a file to `progress` (when given) at most every 4 MiB.
class ByteProgress {
 public:
  explicit ByteProgress(const std::function<void(int64_t)>& progress) : progress_(progress) {}
  void update(TextInput& input) {
    if (!progress_ || ++calls_ % 256 != 0) return;
    const int64_t at = input.bytes_read();
    if (at - reported_ >= (int64_t{4} << 20)) progress_(reported_ = at);
  }

 private:
  const std::function<void(int64_t)>& progress_;
  int64_t reported_ = 0, calls_ = 0;
};

}  // namespace

void check_json_line(std::string_view line, const std::string& where) {
  // A JSON document written over several lines (an indented array or object) is not JSON lines.
  check_input(trim(line) != "[" && trim(line) != "{",
              where + ": '" + std::string(trim(line)) + "' alone on a line: a JSON document over several lines, not JSON "
                      "lines (one object a line; jq -c '.[]' writes an array's objects so)");
}

namespace {

// Each line's string field, as it is (a null field is no text).
void jsonl_texts(TextInput& input, const std::string& path, const std::string& text_field,
                 const std::function<void(std::string_view)>& text, ByteProgress& progress) {
  std::string line;
  int64_t line_no = 0;
  while (std::getline(input.stream(), line)) {
    progress.update(input);
    check_no_nul(line, path, ++line_no);
    if (trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    check_json_line(line, where);
    const nlohmann::json j = parse_json(line, where, /*with_line=*/false);
    check_input(j.is_object(), where + ": a JSON " + std::string(j.type_name()) + ", not an object with a field '" + text_field + "'");
    const auto field = j.find(text_field);
    check_input(field != j.end(), where + ": no field '" + text_field + "' (--text-field names the field of texts)");
    if (field->is_null()) continue;  // no text: no document, as a null in a Parquet column of texts
    check_input(field->is_string(), where + ": field '" + text_field + "' holds a " + std::string(field->type_name()) + ", not text");
    text(field->get_ref<const std::string&>());
  }
}

// Whether a file holds WikiText titles (" = Title = "): its articles are then its documents.
bool has_wikitext_titles(const std::string& path) {
  TextInput input(path);
  for (std::string line; std::getline(input.stream(), line);) {
    if (is_wikitext_title(line)) return true;
  }
  return false;
}

// Blank lines separate documents; WikiText articles (its = Title = lines) when the file has them
// (a first pass looks for one, so that the second holds one document at a time).
void blank_line_documents(const std::string& path, const std::function<void(Document&&)>& document,
                          const std::function<void(int64_t)>& report) {
  const bool wikitext = has_wikitext_titles(path);
  TextInput input(path);
  ByteProgress progress(report);
  Document doc;
  auto close = [&] {
    if (!doc.sentences.empty()) document(std::move(doc));
    doc = Document();
  };
  int64_t line_no = 0;
  for (std::string line; std::getline(input.stream(), line);) {
    progress.update(input);
    check_no_nul(line, path, ++line_no);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) {
      if (!wikitext) close();
      continue;
    }
    if (wikitext && is_wikitext_title(line)) close();
    add_paragraph(doc, line);
  }
  close();
}

}  // namespace

std::optional<TextFormat> resolve_format(const std::string& path, TextFormat format) {
  if (is_parquet_file(path)) return std::nullopt;  // its column, whatever the format
  if (format != TextFormat::kAuto) return format;
  // *.jsonl, and *.json as C4 and Dolma ship their JSON lines (c4-train.00000-of-01024.json.gz), compressed or
  // not: a decompressed shard's JSON was read as plain text, one document of '{"text": ...' lines.
  const std::string name = strip_compression_suffix(path);
  const bool jsonl = ends_with(name, ".jsonl") || ends_with(name, ".json");
  return jsonl ? TextFormat::kJsonl : TextFormat::kBlankLine;
}

void for_each_document(const std::string& path, TextFormat format_in, const std::string& text_field,
                       const std::function<void(Document&&)>& document, const std::function<void(int64_t)>& progress) {
  const std::optional<TextFormat> resolved = resolve_format(path, format_in);
  const auto emit = [&](std::string_view text) { emit_text(text, document); };  // one document a JSONL or Parquet text
  if (!resolved) {
    read_parquet_texts(path, text_field, emit);
    return;
  }
  const TextFormat format = *resolved;
  if (format == TextFormat::kBlankLine) return blank_line_documents(path, document, progress);
  TextInput input(path);  // plain, gzip or zstd; anything else that is not text refused by name
  ByteProgress bytes(progress);
  if (format == TextFormat::kJsonl) return jsonl_texts(input, path, text_field, emit, bytes);
  int64_t line_no = 0;
  for (std::string line; std::getline(input.stream(), line);) {  // lines: one document each
    bytes.update(input);
    check_no_nul(line, path, ++line_no);
    Document doc;
    add_paragraph(doc, line);
    if (!doc.sentences.empty()) document(std::move(doc));
  }
}

void check_text_field_used(const std::vector<std::string>& files, const std::string& field, const std::string& flag) {
  if (field == "text") return;
  for (const auto& f : files) {
    const auto format = resolve_format(f, TextFormat::kAuto);
    if (!format || *format == TextFormat::kJsonl) return;  // Parquet or JSONL: it has fields
  }
  throw InputError(flag + " " + field + ": no text input has fields to name (JSONL or Parquet): " +
                   (files.empty() ? "every input is a token corpus (encoded with its own --text-field)"
                                  : files.front() + " is read as plain text (JSONL is *.jsonl or *.json, compressed or not)"));
}

int64_t text_bytes(const std::string& path, TextFormat format_in, const std::string& text_field) {
  const std::optional<TextFormat> format = resolve_format(path, format_in);
  int64_t bytes = 0;
  const auto count = [&](std::string_view text) { bytes += static_cast<int64_t>(text.size()) + 1; };
  if (!format) {
    read_parquet_texts(path, text_field, count);
    return bytes;
  }
  if (*format != TextFormat::kJsonl && sniff_text_file(path) == Compression::kNone) {
    std::ifstream in(path, std::ios::binary);
    char head[3] = {};
    in.read(head, 3);
    const bool bom = in.gcount() == 3 && starts_with_byte_order_mark(std::string_view(head, 3));  // no text: the readers leave it out
    return static_cast<int64_t>(std::filesystem::file_size(path)) - (bom ? 3 : 0);
  }
  TextInput input(path);
  if (*format == TextFormat::kJsonl) {
    const std::function<void(int64_t)> no_report;
    ByteProgress none(no_report);
    jsonl_texts(input, path, text_field, count, none);
    return bytes;
  }
  std::vector<char> buffer(1 << 16);  // compressed plain text: its decompressed bytes
  while (input.stream().read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || input.stream().gcount() > 0) {
    bytes += input.stream().gcount();
  }
  return bytes;
}

std::vector<Document> read_documents(const std::string& path, TextFormat format, const std::string& text_field) {
  std::vector<Document> docs;
  for_each_document(path, format, text_field, [&](Document&& d) { docs.push_back(std::move(d)); });
  return docs;
}

}  // namespace lmkit::data
