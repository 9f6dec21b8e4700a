// The rows of a supervised data file that holds named fields: a JSONL file (plain, gzip or
// zstd) a line a row, or a Parquet file (HF datasets' to_parquet, the Hub's conversions of
// GLUE, CoNLL-2003, ...) a row a row, each as a JSON object. The classification, text-to-text
// and token-classification readers take their fields from these rows alike.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::data {

/// Where a row is, for messages: "PATH:LINE" of a JSONL line, "PATH: row N" of a Parquet row.
struct RowPlace {
  std::string where;
  int64_t number = 0;  ///< the line (JSONL) or row (Parquet), from 1
};

/// Calls `row(values, place)` for each non-blank line of a JSONL file, or each row of a Parquet
/// file (by its first bytes, whatever its name; only the columns named in `fields` are read). A
/// line that is not JSON is an InputError naming the file and line; SIGTERM stops between rows
/// (kPreparingExamples).
void for_each_json_row(const std::string& path, const std::vector<std::string>& fields,
                       const std::function<void(const Json&, const RowPlace&)>& row);

/// Whether a supervised reader's "auto" format takes `path` as rows of named fields: a Parquet
/// file (by its first bytes), or JSON lines (*.jsonl, and *.json as HF datasets' to_json writes
/// them; compressed or not) — not TSV, CSV or CoNLL columns.
bool json_rows(const std::string& path);

/// The ClassLabel names a Parquet file records for its columns (parquet_class_labels); none for JSONL.
std::map<std::string, std::vector<std::string>> class_labels(const std::string& path);

}  // namespace lmkit::data
