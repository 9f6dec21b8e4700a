#include "lmkit/data/text.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
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

// One document per non-null text of a Parquet file's column.
std::vector<Document> read_parquet_documents(const std::string& path, const std::string& column) {
  std::vector<Document> docs;
  read_parquet_texts(path, column, [&](std::string_view text) {
    Document doc = document_of(text);
    if (!doc.sentences.empty()) docs.push_back(std::move(doc));
  });
  return docs;
}

// One document per line's string field; paragraphs inside it are separated by newlines.
std::vector<Document> read_jsonl_documents(std::istream& in, const std::string& path, const std::string& text_field) {
  std::vector<Document> docs;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const nlohmann::json j = parse_json(line, path + ":" + std::to_string(line_no), /*with_line=*/false);
    if (!j.is_object() || !j.contains(text_field) || !j[text_field].is_string()) {
      throw InputError(path + ":" + std::to_string(line_no) + ": no string field '" + text_field + "'");
    }
    Document doc = document_of(j[text_field].get<std::string>());
    if (!doc.sentences.empty()) docs.push_back(std::move(doc));
  }
  return docs;
}

// Blank lines separate documents; WikiText articles (its = Title = lines) when the file has them.
std::vector<Document> read_blank_line_documents(std::istream& in) {
  std::vector<std::string> lines;
  bool wikitext = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    wikitext = wikitext || is_wikitext_title(line);
    lines.push_back(std::move(line));
  }
  std::vector<Document> docs;
  Document doc;
  auto close = [&] {
    if (!doc.sentences.empty()) docs.push_back(std::move(doc));
    doc = Document();
  };
  for (const auto& l : lines) {
    if (trim(l).empty()) {
      if (!wikitext) close();
      continue;
    }
    if (wikitext && is_wikitext_title(l)) close();
    add_paragraph(doc, l);
  }
  close();
  return docs;
}

}  // namespace

std::vector<Document> read_documents(const std::string& path, TextFormat format, const std::string& text_field) {
  if (is_parquet_file(path)) return read_parquet_documents(path, text_field);  // its column, whatever the format
  TextInput input(path);  // plain, gzip or zstd; anything else that is not text refused by name
  std::istream& in = input.stream();
  if (format == TextFormat::kAuto) {
    // *.jsonl, and compressed *.json as C4 and Dolma ship their JSON lines (c4-train.00000-of-01024.json.gz).
    const std::string name = strip_compression_suffix(path);
    const bool jsonl = ends_with(name, ".jsonl") || (input.compression() != Compression::kNone && ends_with(name, ".json"));
    format = jsonl ? TextFormat::kJsonl : TextFormat::kBlankLine;
  }
  if (format == TextFormat::kJsonl) return read_jsonl_documents(in, path, text_field);
  if (format == TextFormat::kBlankLine) return read_blank_line_documents(in);
  std::vector<Document> docs;
  for (std::string line; std::getline(in, line);) {
    Document doc;
    add_paragraph(doc, line);
    if (!doc.sentences.empty()) docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace lmkit::data
