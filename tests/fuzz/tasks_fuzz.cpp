// Fuzzes the text readers: labelled rows from TSV, CSV and JSONL (classification
// data) and documents from JSONL and blank-line text (pretraining input), plain or as
// corpora are shipped, gzip or zstd (the seeds hold both). The first byte picks the
// reader; the rest is the file.
#include "fuzz_util.h"
#include "lmkit/data/tasks.h"
#include "lmkit/data/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 6;
  static const char* kFiles[] = {"rows.tsv", "rows.csv", "rows.jsonl", "docs.jsonl", "docs.txt", "rows_noheader.tsv"};
  const auto path = lmkit::fuzz::scratch() / kFiles[kind];
  lmkit::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  lmkit::fuzz::expect_input_errors([&] {
    if (kind == 3 || kind == 4) {
      for (const auto& doc : lmkit::data::read_documents(path.string())) {
        for (const auto& s : doc.sentences) (void)lmkit::data::split_sentences(s);
      }
      return;
    }
    lmkit::data::ColumnSpec columns;
    if (kind == 1) columns.text_pair = "sentence2";
    if (kind == 5) columns.text = "1", columns.label = "0";
    const auto rows = lmkit::data::read_labelled_rows(path.string(), columns);
    (void)lmkit::data::make_label_map(rows);
  });
  return 0;
}
