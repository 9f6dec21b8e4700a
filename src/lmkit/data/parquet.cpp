#include "lmkit/data/parquet.h"

#include <fstream>
#include <vector>

#include "lmkit/core/error.h"

#ifdef LMKIT_WITH_PARQUET
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#endif

namespace lmkit::data {

bool is_parquet_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  return in.read(head, 4) && std::string(head, 4) == "PAR1";
}

#ifdef LMKIT_WITH_PARQUET

namespace {

// Arrow's message on one line: its line breaks as "; ", other control bytes (a damaged file's) as '?'.
std::string one_line(const std::string& message) {
  std::string out;
  for (char c : message) {
    if (c == '\n') out += out.empty() || out.back() == ' ' ? "" : "; ";
    else out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

// The value of an Arrow result, or InputError "PATH: WHAT (Arrow's message)".
template <class T>
T arrow_value(arrow::Result<T> result, const std::string& what) {
  if (!result.ok()) throw InputError(what + " (" + one_line(result.status().message()) + ")");
  return std::move(result).ValueOrDie();
}

void arrow_ok(const arrow::Status& status, const std::string& what) {
  if (!status.ok()) throw InputError(what + " (" + one_line(status.message()) + ")");
}

bool string_type(const arrow::DataType& type) {
  return type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING ||
         type.id() == arrow::Type::STRING_VIEW;
}

// The non-null values of one chunk of the text column, in order; returns the nulls.
int64_t visit_strings(const arrow::Array& array, const std::function<void(std::string_view)>& text) {
  int64_t nulls = 0;
  for (int64_t i = 0; i < array.length(); ++i) {
    if (array.IsNull(i)) {
      ++nulls;
      continue;
    }
    switch (array.type_id()) {
      case arrow::Type::STRING: text(static_cast<const arrow::StringArray&>(array).GetView(i)); break;
      case arrow::Type::LARGE_STRING: text(static_cast<const arrow::LargeStringArray&>(array).GetView(i)); break;
      case arrow::Type::STRING_VIEW: text(static_cast<const arrow::StringViewArray&>(array).GetView(i)); break;
      default: {  // dictionary-encoded strings (checked against the schema first)
        const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
        const int64_t index = dict.GetValueIndex(i);
        const arrow::Array& values = *dict.dictionary();
        if (values.type_id() == arrow::Type::LARGE_STRING) {
          text(static_cast<const arrow::LargeStringArray&>(values).GetView(index));
        } else {
          text(static_cast<const arrow::StringArray&>(values).GetView(index));
        }
      }
    }
  }
  return nulls;
}

// The column's index in the file's schema, checked to hold strings.
int text_column(const arrow::Schema& schema, const std::string& path, const std::string& column) {
  const std::vector<int> named = schema.GetAllFieldIndices(column);
  check_input(named.size() < 2, path + ": " + std::to_string(named.size()) + " columns are named '" + column +
                                    "' (which holds the texts is not clear; write the file with one)");
  const int index = named.empty() ? -1 : named.front();
  if (index < 0) {
    std::string names;
    for (const auto& f : schema.fields()) names += (names.empty() ? "" : ", ") + f->name();
    throw InputError(path + ": no column '" + column + "' (it has " + (names.empty() ? "none" : names) +
                     "; --text-field names the column of texts)");
  }
  const auto& type = *schema.field(index)->type();
  const bool dictionary = type.id() == arrow::Type::DICTIONARY &&
                          string_type(*static_cast<const arrow::DictionaryType&>(type).value_type());
  check_input(string_type(type) || dictionary,
              path + ": column '" + column + "' holds " + type.ToString() + ", not text (a string column)");
  return index;
}

}  // namespace

bool parquet_available() { return true; }

ParquetCounts read_parquet_texts(const std::string& path, const std::string& column,
                                 const std::function<void(std::string_view)>& text) {
  ParquetCounts counts;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  std::shared_ptr<arrow::Schema> schema;
  try {
    auto file = arrow_value(arrow::io::ReadableFile::Open(path), path + ": cannot open");
    // Arrow checks the CRC of a page whose writer stored one (pyarrow's write_page_checksum); most
    // writers store none, and damage inside such a page's values reads as other text.
    parquet::ReaderProperties properties = parquet::default_reader_properties();
    properties.set_page_checksum_verification(true);
    parquet::arrow::FileReaderBuilder builder;
    arrow_ok(builder.Open(file, properties), path + ": not a readable Parquet file (damaged or truncated)");
    reader = arrow_value(builder.memory_pool(arrow::default_memory_pool())->Build(),
                         path + ": not a readable Parquet file (damaged or truncated)");
    arrow_ok(reader->GetSchema(&schema), path + ": no readable schema");
  } catch (const parquet::ParquetException& e) {
    throw InputError(path + ": not a readable Parquet file, damaged or truncated (" + one_line(e.what()) + ")");
  }
  const int index = text_column(*schema, path, column);
  counts.row_groups = reader->num_row_groups();
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    const std::string where = path + ": row group " + std::to_string(g) + " of " + std::to_string(counts.row_groups);
    std::shared_ptr<arrow::Table> table;
    try {
      table = arrow_value(reader->ReadRowGroup(g, {index}), where + ": damaged");
    } catch (const parquet::ParquetException& e) {
      throw InputError(where + ": damaged (" + one_line(e.what()) + ")");
    }
    for (const auto& chunk : table->column(0)->chunks()) {
      counts.rows += chunk->length();
      counts.nulls += visit_strings(*chunk, text);
    }
  }
  return counts;
}

#else

bool parquet_available() { return false; }

ParquetCounts read_parquet_texts(const std::string& path, const std::string&, const std::function<void(std::string_view)>&) {
  throw Error(ExitCode::kRuntime, path + ": a Parquet file, and this lmkit was built without Parquet: install pyarrow "
                                         "into the build's Python environment (bash scripts/setup.sh) and rebuild");
}

#endif

}  // namespace lmkit::data
