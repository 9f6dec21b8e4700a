// The text a SentencePiece tokenizer learns from, taken from inputs as corpora are shipped.
// SentencePiece's trainer reads plain text files itself, a line a sentence: given a JSONL file it
// learned the JSON around the texts ("text", '{', escaped quotes and \uXXXX escapes), and it
// could not read gzip, zstd or Parquet at all. Here such inputs are read as the encoder reads
// them (for_each_document) and their sentences handed to the trainer as plain lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/data/text.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

/// Whether SentencePiece's trainer learns what lmkit reads of `path` by reading it itself: an
/// uncompressed text file that `format` does not read by a field (not JSONL, not Parquet), with
/// no byte-order mark and no carriage return (Windows line ends) in its first 64 KiB, which the readers
/// leave out and the trainer would learn.
bool trainer_reads_directly(const std::string& path, TextFormat format);

/// Writes the sentences of the documents of `inputs` (for_each_document: JSONL's field and
/// Parquet's column `text_field`, gzip and zstd decompressed), one a line, to `path`: every one
/// in order when there are at most `max_sentences`, else a uniform sample of `max_sentences`
/// (reservoir sampling from a fixed seed, kept in input order), as SentencePiece's own
/// input_sentence_size samples lines; memory holds the sample, never the input. Checks for a stop
/// signal between documents ("tokenizer training"). Returns the sentences read. An InputError
/// when the inputs hold no text.
int64_t write_training_sentences(const std::vector<std::string>& inputs, TextFormat format, const std::string& text_field,
                                 int64_t max_sentences, const std::string& path);

/// tokenizer::Tokenizer::train on `options.inputs` as corpora ship them (files, directories of
/// shards, quoted glob patterns; plain, gzip or zstd text, JSONL, Parquet). When every file is one
/// trainer_reads_directly, the trainer reads them as before (the same tokenizer, bit for bit);
/// otherwise the sentences of all of them go to the trainer through write_training_sentences, in a
/// scratch file beside the output that is removed whatever happens. The same texts as JSONL,
/// .jsonl.gz, .jsonl.zst or Parquet give the same tokenizer.
tokenizer::Tokenizer train_tokenizer(tokenizer::TrainOptions options, TextFormat format = TextFormat::kAuto,
                                     const std::string& text_field = "text");

}  // namespace lmkit::data
