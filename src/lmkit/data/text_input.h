// Text inputs as corpora are shipped: plain, gzip (C4's and Dolma's .json.gz) or zstd
// (The Pile's and SlimPajama's .jsonl.zst), recognised by their first bytes and decompressed
// as they are read, a buffer at a time (bounded memory). Whatever is not text — a Parquet
// shard, another archive format, bytes with NULs or mostly invalid UTF-8 — is refused by
// name before a byte of it is taken for text. A damaged or truncated compressed stream is an
// InputError naming the file and the line it broke in, never a silently shorter corpus.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lmkit::data {

enum class Compression { kNone, kGzip, kZstd };

/// What a file's first bytes say it is: a compression lmkit reads, or an InputError naming the
/// format it does not read ("Parquet", "bzip2", "xz", "zip") or why it is not text (NUL bytes,
/// invalid UTF-8). Reads at most the first 64 KiB.
Compression sniff_text_file(const std::string& path);

/// A whole text file (a dataset's TSV, CSV or JSONL), gzip or zstd decompressed by its first
/// bytes as TextInput reads it; a binary file, Parquet or an archive is an InputError naming it.
std::string read_text(const std::string& path);

/// Refuses a NUL byte in `line` (line `line_no` of `path`) as not text: the sniff sees a file's
/// first 64 KiB, the readers check every line past them.
void check_no_nul(std::string_view line, const std::string& path, int64_t line_no);

/// read_text's lines, as split_lines (core/file.h) gives them.
std::vector<std::string> read_text_lines(const std::string& path);

/// `path` without a trailing ".gz" or ".zst" ("c4.json.gz" -> "c4.json").
std::string strip_compression_suffix(const std::string& path);

/// The files `inputs` name, in order: a file as it is; a directory, its files (not its hidden
/// ones) sorted by name, as shards are numbered (c4-train.00000-of-01024), a subdirectory in it
/// an InputError (reading past it would make a shorter corpus without a word);
/// a quoted glob pattern ("shards/*.jsonl.zst"), its matches sorted. A directory or pattern that
/// yields no file is an InputError, never an empty input.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

/// An open text input: stream() yields the decompressed bytes. Reading past a damaged or
/// truncated compressed stream throws an InputError "PATH:LINE: ..." out of the stream's
/// reads (the stream's badbit is an exception).
class TextInput {
 public:
  explicit TextInput(const std::string& path);
  ~TextInput();
  TextInput(const TextInput&) = delete;
  TextInput& operator=(const TextInput&) = delete;

  std::istream& stream();
  Compression compression() const;
  /// Bytes of the file read so far (compressed bytes for gzip and zstd), for progress.
  int64_t bytes_read();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmkit::data
