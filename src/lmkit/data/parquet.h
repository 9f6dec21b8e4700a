// Parquet shards as HF datasets' conversions and FineWeb ship them: the documents of one text
// column, read a row group at a time through Apache Arrow's C++ libraries (PyPI's pyarrow wheel,
// found beside torch at configure time; docs/architecture.md says why). The interface holds no
// Arrow type: data/parquet.cpp alone includes Arrow (whose headers need C++20).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::data {

/// Whether this build reads Parquet (configured with pyarrow beside torch).
bool parquet_available();

/// Whether `path` starts as a Parquet file does ("PAR1").
bool is_parquet_file(const std::string& path);

struct ParquetCounts {
  int64_t row_groups = 0;
  int64_t rows = 0;
  int64_t nulls = 0;  ///< null texts, skipped: no document
};

/// Calls `text(value)` for each non-null value of the string column `column` (string,
/// large_string or dictionary-encoded strings; any page compression Arrow reads: snappy, zstd,
/// gzip, ...), in row order, one row group in memory at a time. InputError: no such column
/// (naming those there are), a column that holds no strings (naming its type), a file Arrow
/// cannot open or a row group it cannot read (naming the file and the row group); an
/// EnvironmentError when this build has no Parquet reader.
ParquetCounts read_parquet_texts(const std::string& path, const std::string& column,
                                 const std::function<void(std::string_view)>& text);

/// Calls `row(values)` for each row of the file, in order, one row group in memory at a time:
/// an object of every column's value as JSON (strings, numbers, booleans, null, lists as arrays,
/// structs as objects; other types as Arrow prints them), as a JSONL line of the same data would
/// hold them (HF datasets' to_json and to_parquet of one split). Only `columns` are read where
/// given (those the file has; a reader names a missing one): a dataset's other columns, images as
/// bytes among them, are neither read nor converted. Errors as read_parquet_texts'; two columns of
/// one name are an InputError.
int64_t read_parquet_rows(const std::string& path, const std::vector<std::string>& columns,
                          const std::function<void(Json&&)>& row);

/// HF datasets' ClassLabel names of the file's columns, from its schema's `huggingface` metadata
/// (which datasets' to_parquet and the Hub's Parquet conversions write): column -> names in id
/// order, for a ClassLabel column and for a list of them (CoNLL-2003's ner_tags); empty where the
/// file says none.
std::map<std::string, std::vector<std::string>> parquet_class_labels(const std::string& path);

}  // namespace lmkit::data
