#include "lmkit/data/rows.h"

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/parquet.h"
#include "lmkit/data/text.h"
#include "lmkit/data/text_input.h"

namespace lmkit::data {

bool json_rows(const std::string& path) {
  const std::string name = strip_compression_suffix(path);  // train.jsonl.zst is JSON lines
  return is_parquet_file(path) || ends_with(name, ".jsonl") || ends_with(name, ".json");
}

void for_each_json_row(const std::string& path, const std::vector<std::string>& fields,
                       const std::function<void(const Json&, const RowPlace&)>& row) {
  if (is_parquet_file(path)) {
    int64_t n = 0;
    read_parquet_rows(path, fields, [&](Json&& values) {
      check_stop(kPreparingExamples);
      ++n;
      row(values, {path + ": row " + std::to_string(n), n});
    });
    return;
  }
  const auto lines = read_text_lines(path);  // .gz and .zst too
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) continue;
    check_stop(kPreparingExamples);
    const RowPlace place{path + ":" + std::to_string(i + 1), static_cast<int64_t>(i + 1)};
    check_json_line(lines[i], place.where);
    row(parse_json(lines[i], place.where, /*with_line=*/false), place);
  }
}

std::map<std::string, std::vector<std::string>> class_labels(const std::string& path) {
  return is_parquet_file(path) ? parquet_class_labels(path) : std::map<std::string, std::vector<std::string>>{};
}

}  // namespace lmkit::data
