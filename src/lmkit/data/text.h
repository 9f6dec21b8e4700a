// Raw text into documents and sentences, from the input formats lmkit reads:
//   blank-line: paragraphs separated by blank lines, each paragraph a document;
//               but a WikiText file (lines " = Title = ") makes each article a
//               document, its headings starting them
//   lines:      one document per line
//   jsonl:      one JSON object per line, the document in a text field
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmkit::data {

enum class TextFormat { kAuto, kBlankLine, kLines, kJsonl };
/// auto, blank-line, lines, jsonl (InputError otherwise).
TextFormat parse_text_format(const std::string& name);

/// A document as a list of sentences (the unit NSP segments are built from).
struct Document {
  std::vector<std::string> sentences;
};

/// Calls `document` for each document of a file, in order, holding one at a time (a Parquet
/// file: one row group); `progress(bytes)`, when given, hears how many of the file's bytes
/// (compressed ones for gzip and zstd) have been read, every few MiB. Formats and errors as
/// read_documents.
void for_each_document(const std::string& path, TextFormat format, const std::string& text_field,
                       const std::function<void(Document&&)>& document,
                       const std::function<void(int64_t)>& progress = nullptr);

/// Refuses a line (at `where`) that opens a JSON document written over several lines: '[' or
/// '{' alone on it, which JSON lines never hold.
void check_json_line(std::string_view line, const std::string& where);

/// The format `format` reads `path` in: kAuto resolved (jsonl for *.jsonl and *.json, compressed
/// or not, else blank-line); std::nullopt for a Parquet file, which is read by its column whatever the
/// format. lmkit-tokenize encode refuses a --format or --text-field that no input would use.
std::optional<TextFormat> resolve_format(const std::string& path, TextFormat format);

/// Refuses a `flag` naming a texts' field (`field`; "text", the default, always passes) that no
/// file of `files` has: none is JSONL or Parquet (plain text has no fields), or there is none
/// (every input a token corpus, encoded with a field of its own). An InputError that says which.
void check_text_field_used(const std::vector<std::string>& files, const std::string& field, const std::string& flag);

/// The UTF-8 bytes of the text lmkit reads from `path` (a figure's denominator: bits per byte):
/// a plain text file's bytes (decompressed, for gzip and zstd), or a JSONL file's or Parquet
/// column's texts with one byte for each one's end — not the JSON or Parquet around them, nor
/// a compressed file's size.
int64_t text_bytes(const std::string& path, TextFormat format = TextFormat::kAuto, const std::string& text_field = "text");

/// Reads a file's documents. kAuto: jsonl for *.jsonl, otherwise blank-line.
/// A missing file, an unreadable JSONL line or a missing text field is an
/// InputError naming the file and line.
std::vector<Document> read_documents(const std::string& path, TextFormat format = TextFormat::kAuto,
                                     const std::string& text_field = "text");

/// Splits a paragraph into sentences after '.', '!' or '?' (and closing quotes
/// or brackets) followed by whitespace and an upper-case letter, digit or
/// opening quote. Whitespace at the ends of each sentence is trimmed.
std::vector<std::string> split_sentences(std::string_view paragraph);

/// Whether a line is a WikiText top-level heading (" = Title = ", not " = = Sub = = ").
bool is_wikitext_title(std::string_view line);

}  // namespace lmkit::data
