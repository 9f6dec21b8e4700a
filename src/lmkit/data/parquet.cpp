#include "lmkit/data/parquet.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <vector>

#include "lmkit/core/error.h"

#ifdef LMKIT_WITH_PARQUET
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
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

// The file's reader and schema; InputError naming the file where Arrow cannot read them.
std::unique_ptr<parquet::arrow::FileReader> open_reader(const std::string& path, std::shared_ptr<arrow::Schema>& schema) {
  std::unique_ptr<parquet::arrow::FileReader> reader;
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
  return reader;
}

// The Parquet leaf columns of the schema's top-level fields `fields`: a row group is read by leaf,
// and a list or struct before a field shifts its leaves (taken as field indices, a struct of two
// strings before the texts had its second string read as them).
std::vector<int> leaf_columns(const parquet::arrow::FileReader& reader, const std::vector<int>& fields) {
  std::vector<int> leaves;
  std::function<void(const parquet::arrow::SchemaField&)> walk = [&](const parquet::arrow::SchemaField& f) {
    if (f.is_leaf()) leaves.push_back(f.column_index);
    for (const auto& child : f.children) walk(child);
  };
  for (const int field : fields) walk(reader.manifest().schema_fields.at(static_cast<size_t>(field)));
  return leaves;
}

// Row group `g` of the schema's top-level fields `fields` (all where empty); InputError naming the
// group where it is damaged.
std::shared_ptr<arrow::Table> read_row_group(parquet::arrow::FileReader& reader, int g, const std::vector<int>& fields,
                                             const std::string& path) {
  const std::string where = path + ": row group " + std::to_string(g) + " of " + std::to_string(reader.num_row_groups());
  try {
    return fields.empty() ? arrow_value(reader.ReadRowGroup(g), where + ": damaged")
                          : arrow_value(reader.ReadRowGroup(g, leaf_columns(reader, fields)), where + ": damaged");
  } catch (const parquet::ParquetException& e) {
    throw InputError(where + ": damaged (" + one_line(e.what()) + ")");
  }
}

// A signed integer as JSON parsing gives it: unsigned where it is not negative (is_number_unsigned()).
Json integer(int64_t v) { return v >= 0 ? Json(static_cast<uint64_t>(v)) : Json(v); }

// Value `i` of `array` as JSON, as a JSONL line of the same data holds it.
Json json_value(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) return nullptr;
  switch (array.type_id()) {
    case arrow::Type::BOOL: return static_cast<const arrow::BooleanArray&>(array).Value(i);
    case arrow::Type::INT8: return integer(static_cast<const arrow::Int8Array&>(array).Value(i));
    case arrow::Type::INT16: return integer(static_cast<const arrow::Int16Array&>(array).Value(i));
    case arrow::Type::INT32: return integer(static_cast<const arrow::Int32Array&>(array).Value(i));
    case arrow::Type::INT64: return integer(static_cast<const arrow::Int64Array&>(array).Value(i));
    case arrow::Type::UINT8: return static_cast<const arrow::UInt8Array&>(array).Value(i);
    case arrow::Type::UINT16: return static_cast<const arrow::UInt16Array&>(array).Value(i);
    case arrow::Type::UINT32: return static_cast<const arrow::UInt32Array&>(array).Value(i);
    case arrow::Type::UINT64: return static_cast<const arrow::UInt64Array&>(array).Value(i);
    case arrow::Type::FLOAT: return static_cast<const arrow::FloatArray&>(array).Value(i);
    case arrow::Type::DOUBLE: return static_cast<const arrow::DoubleArray&>(array).Value(i);
    case arrow::Type::STRING: return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
    case arrow::Type::LARGE_STRING: return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(i));
    case arrow::Type::STRING_VIEW: return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(i));
    case arrow::Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      return json_value(*dict.dictionary(), dict.GetValueIndex(i));
    }
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST: {
      int64_t begin = 0, length = 0;
      std::shared_ptr<arrow::Array> values;
      if (array.type_id() == arrow::Type::LIST) {
        const auto& list = static_cast<const arrow::ListArray&>(array);
        begin = list.value_offset(i), length = list.value_length(i), values = list.values();
      } else if (array.type_id() == arrow::Type::LARGE_LIST) {
        const auto& list = static_cast<const arrow::LargeListArray&>(array);
        begin = list.value_offset(i), length = list.value_length(i), values = list.values();
      } else {
        const auto& list = static_cast<const arrow::FixedSizeListArray&>(array);
        begin = list.value_offset(i), length = list.value_length(i), values = list.values();
      }
      Json out = Json::array();
      for (int64_t k = 0; k < length; ++k) out.push_back(json_value(*values, begin + k));
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& st = static_cast<const arrow::StructArray&>(array);
      Json out = Json::object();
      for (int f = 0; f < st.num_fields(); ++f) out[st.struct_type()->field(f)->name()] = json_value(*st.field(f), i);
      return out;
    }
    default: {  // dates, decimals, binary, ...: as Arrow prints them
      const auto scalar = array.GetScalar(i);
      return scalar.ok() ? Json((*scalar)->ToString()) : Json(nullptr);
    }
  }
}

}  // namespace

bool parquet_available() { return true; }

ParquetCounts read_parquet_texts(const std::string& path, const std::string& column,
                                 const std::function<void(std::string_view)>& text) {
  ParquetCounts counts;
  std::shared_ptr<arrow::Schema> schema;
  const std::unique_ptr<parquet::arrow::FileReader> reader = open_reader(path, schema);
  const int index = text_column(*schema, path, column);
  counts.row_groups = reader->num_row_groups();
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    const std::shared_ptr<arrow::Table> table = read_row_group(*reader, g, {index}, path);
    for (const auto& chunk : table->column(0)->chunks()) {
      counts.rows += chunk->length();
      counts.nulls += visit_strings(*chunk, text);
    }
  }
  return counts;
}

int64_t read_parquet_rows(const std::string& path, const std::vector<std::string>& columns,
                          const std::function<void(Json&&)>& row) {
  std::shared_ptr<arrow::Schema> schema;
  const std::unique_ptr<parquet::arrow::FileReader> reader = open_reader(path, schema);
  std::set<std::string> names;
  for (const auto& f : schema->fields()) {
    check_input(names.insert(f->name()).second, path + ": two columns are named '" + f->name() + "'");
  }
  std::vector<int> wanted;  // the columns asked for, in the file's order; empty: every column
  for (int c = 0; c < schema->num_fields(); ++c) {
    if (std::find(columns.begin(), columns.end(), schema->field(c)->name()) != columns.end()) wanted.push_back(c);
  }
  // None there: rows of the first column alone, for the reader to name what is missing.
  if (!columns.empty() && wanted.empty() && schema->num_fields() > 0) wanted.push_back(0);
  int64_t rows = 0;
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    const std::shared_ptr<arrow::Table> table = read_row_group(*reader, g, wanted, path);
    arrow::TableBatchReader batches(*table);  // holds a reference: the table lives beside it
    std::shared_ptr<arrow::RecordBatch> batch;
    while (true) {
      arrow_ok(batches.ReadNext(&batch), path + ": row group " + std::to_string(g) + ": damaged");
      if (!batch) break;
      for (int64_t i = 0; i < batch->num_rows(); ++i, ++rows) {
        Json values = Json::object();
        for (int c = 0; c < batch->num_columns(); ++c) values[batch->column_name(c)] = json_value(*batch->column(c), i);
        row(std::move(values));
      }
    }
  }
  return rows;
}

std::map<std::string, std::vector<std::string>> parquet_class_labels(const std::string& path) {
  std::shared_ptr<arrow::Schema> schema;
  open_reader(path, schema);
  std::map<std::string, std::vector<std::string>> out;
  const auto& metadata = schema->metadata();
  const int key = metadata ? metadata->FindKey("huggingface") : -1;
  if (key < 0) return out;
  const Json hf = Json::parse(metadata->value(key), nullptr, /*allow_exceptions=*/false);
  if (!hf.is_object() || !hf.contains("info") || !hf["info"].is_object() || !hf["info"].contains("features") ||
      !hf["info"]["features"].is_object()) {
    return out;
  }
  // {"_type": "ClassLabel", "names": [...]}, or a list of them: {"_type": "List"|"Sequence", "feature": {...}}.
  auto names_of = [](const Json& feature) -> const Json* {
    const bool label = feature.is_object() && feature.value("_type", "") == "ClassLabel" && feature.contains("names") &&
                       feature["names"].is_array();
    return label ? &feature["names"] : nullptr;
  };
  for (const auto& [column, feature] : hf["info"]["features"].items()) {
    const Json* names = names_of(feature);
    if (!names && feature.is_object() && feature.contains("feature")) names = names_of(feature["feature"]);
    if (!names) continue;
    std::vector<std::string> list;
    for (const auto& n : *names) {
      if (!n.is_string()) break;
      list.push_back(n.get<std::string>());
    }
    if (list.size() == names->size()) out[column] = std::move(list);
  }
  return out;
}

#else

bool parquet_available() { return false; }

namespace {

[[noreturn]] void no_parquet(const std::string& path) {
  throw Error(ExitCode::kRuntime, path + ": a Parquet file, and this lmkit was built without Parquet: install pyarrow "
                                         "into the build's Python environment (bash scripts/setup.sh) and rebuild");
}

}  // namespace

ParquetCounts read_parquet_texts(const std::string& path, const std::string&, const std::function<void(std::string_view)>&) {
  no_parquet(path);
}

int64_t read_parquet_rows(const std::string& path, const std::vector<std::string>&, const std::function<void(Json&&)>&) {
  no_parquet(path);
}

std::map<std::string, std::vector<std::string>> parquet_class_labels(const std::string& path) { no_parquet(path); }

#endif

}  // namespace lmkit::data
