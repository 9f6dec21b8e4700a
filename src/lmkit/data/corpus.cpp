#include "lmkit/data/corpus.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/runtime.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/text_input.h"
#include "lmkit/io/checkpoint.h"

namespace fs = std::filesystem;

namespace lmkit::data {

namespace {

// Encodes in parallel: each thread takes whole chunks, results are joined in
// order, so the output is the same whatever the thread count. A stop signal
// (check_stop) ends it between chunks, as Interrupted naming `during`.
std::vector<std::vector<int32_t>> encode_all(const tokenizer::Tokenizer& tok, const std::vector<std::string>& sentences,
                                             int threads, const std::string& during) {
  const size_t chunk = 1024, num_chunks = (sentences.size() + chunk - 1) / chunk;
  std::vector<std::vector<int32_t>> encoded(sentences.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> abandon{false};  // a worker failed, or a stop signal came
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      for (size_t c; !abandon && (c = next.fetch_add(1)) < num_chunks;) {
        if (stop_pending()) abandon = true;
        for (size_t i = c * chunk; !abandon && i < std::min(sentences.size(), (c + 1) * chunk); ++i) {
          encoded[i] = tok.encode(sentences[i]);
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      failure = std::current_exception();
      abandon = true;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  check_stop(during.c_str());
  return encoded;
}

// The corpus files written as the text is read: tokens.bin in the header's dtype (uint16 while
// the vocabulary fits, else uint32), sentences.bin and documents.bin (start offsets, then the end).
// Sentences wait in a batch of about EncodeOptions::batch_bytes of text, encoded together on every thread, so
// memory holds one batch and its tokens, not the corpus.
class CorpusWriter {
 public:
  CorpusWriter(const std::string& dir, const tokenizer::Tokenizer& tok, int threads, size_t batch_bytes)
      : tok_(tok), threads_(threads), batch_limit_(std::max<size_t>(1, batch_bytes)), wide_(tok.vocab_size() > 65535), tokens_(dir + "/tokens.bin"),
        sentences_(dir + "/sentences.bin"), documents_(dir + "/documents.bin") {
    sentence_starts_.push_back(0);
  }
  void add(Document&& doc) {
    document_starts_.push_back(num_sentences_);
    for (auto& s : doc.sentences) {
      batch_bytes_ += s.size();
      batch_.push_back(std::move(s));
      ++num_sentences_;
    }
    ++num_documents_;
    if (batch_bytes_ >= batch_limit_) flush();
  }
  // Encodes what waits and writes it, one write a file; then, when `last`, closes the files.
  void flush(bool last = false) {
    std::vector<uint16_t> narrow;
    std::vector<uint32_t> full;
    for (const auto& e : encode_all(tok_, batch_, threads_, during_)) {
      if (wide_) full.insert(full.end(), e.begin(), e.end());
      else narrow.insert(narrow.end(), e.begin(), e.end());
      sentence_starts_.push_back(num_tokens_ += e.size());
    }
    if (wide_) tokens_.write(full.data(), full.size() * sizeof(uint32_t));
    else tokens_.write(narrow.data(), narrow.size() * sizeof(uint16_t));
    if (last) document_starts_.push_back(num_sentences_);
    sentences_.write(sentence_starts_.data(), sentence_starts_.size() * sizeof(uint64_t));
    documents_.write(document_starts_.data(), document_starts_.size() * sizeof(uint64_t));
    batch_.clear();
    sentence_starts_.clear();
    document_starts_.clear();
    batch_bytes_ = 0;
    if (last) {
      for (AtomicFile* f : {&tokens_, &sentences_, &documents_}) f->commit();
    }
  }
  /// What a stop signal interrupts, for its message: "the encoding of PATH".
  void reading(const std::string& path) { during_ = "the encoding of " + path; }
  const std::string& during() const { return during_; }
  uint64_t tokens() const { return num_tokens_; }
  uint64_t sentences() const { return num_sentences_; }
  uint64_t documents() const { return num_documents_; }
  bool wide() const { return wide_; }

 private:
  const tokenizer::Tokenizer& tok_;
  int threads_;
  size_t batch_limit_;
  bool wide_;
  AtomicFile tokens_, sentences_, documents_;
  std::vector<std::string> batch_;
  std::vector<uint64_t> sentence_starts_, document_starts_;  // not yet written
  size_t batch_bytes_ = 0;
  std::string during_ = "the encoding";
  uint64_t num_tokens_ = 0, num_sentences_ = 0, num_documents_ = 0;
};

}  // namespace

Json encode_corpus(const tokenizer::Tokenizer& tok, const EncodeOptions& o, const std::string& progress_label) {
  check_input(!o.inputs.empty(), "encode: no input files");
  check_input(!o.output.empty(), "encode: no output corpus");
  int64_t total_bytes = 0, done_bytes = 0;
  for (const auto& path : o.inputs) total_bytes += static_cast<int64_t>(fs::file_size(path));
  std::optional<ProgressBar> bar;
  if (!progress_label.empty()) bar.emplace(total_bytes, progress_label);
  Json header;
  io::write_directory_atomic(o.output, [&](const std::string& tmp) {
    CorpusWriter writer(tmp, tok, resolve_threads(o.threads), o.batch_bytes);
    auto fields = [&] { return ProgressBar::Fields{{"docs", std::to_string(writer.documents())}}; };
    for (const auto& path : o.inputs) {
      // Under a StopSignals (the apps' long work), SIGTERM stops the encoding between documents
      // and between chunks of a batch: the partial corpus goes with the temporary directory.
      writer.reading(path);
      for_each_document(path, o.format, o.text_field,
                        [&](Document&& d) {
                          check_stop(writer.during().c_str());
                          writer.add(std::move(d));
                        },
                        [&](int64_t bytes) {
                          if (bar) bar->update(done_bytes + bytes, fields());
                        });
      done_bytes += static_cast<int64_t>(fs::file_size(path));
      if (bar) bar->update(done_bytes, fields());
    }
    if (writer.sentences() == 0) throw InputError(join_names(o.inputs) + ": no text to encode (empty corpus)");
    writer.flush(/*last=*/true);
    header = {{"format", "lmkit-corpus-1"},
              {"dtype", writer.wide() ? "uint32" : "uint16"},
              {"vocab_size", tok.vocab_size()},
              {"tokenizer_checksum", tok.checksum()},
              {"tokenizer_family", tok.family()},
              {"tokens", writer.tokens()},
              {"sentences", writer.sentences()},
              {"documents", writer.documents()},
              {"sources", o.inputs}};
    save_json_file(tmp + "/header.json", header);
  });
  if (bar) bar->finish();
  return header;
}

bool is_corpus(const std::string& path) { return fs::is_directory(path) && fs::exists(path + "/header.json"); }

std::vector<std::string> text_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // A run's or finetuning's output read as shards would fail on config.json's lines: say what it is.
    check_input(!fs::exists(fs::path(path) / "config.json", ec),
                path + ": a model checkpoint directory, not text or a token corpus (no header.json)");
  } else if (path.find_first_of("*?[") == std::string::npos && !fs::exists(path, ec)) {
    throw InputError(path + ": no such text file or corpus directory");
  }
  std::vector<std::string> files = expand_inputs({path});  // a directory's shards, a pattern's matches
  for (const auto& f : files) check_readable_file(f);  // a FIFO or a device is named as one, not as missing
  return files;
}

void check_text_file(const std::string& path) { text_files(path); }

std::shared_ptr<const Corpus> open_corpus(const std::string& path, const tokenizer::Tokenizer& tok,
                                          const std::string& cache_dir, const std::string& name,
                                          const std::string& text_field) {
  if (is_corpus(path)) {
    auto c = std::make_shared<const Corpus>(path);
    c->check_tokenizer(tok);
    return c;
  }
  const std::vector<std::string> files = text_files(path);
  std::string identity;  // one file: "PATH|SIZE|TIME|", the key of the corpora cached before shards were read
  for (const auto& f : files) {
    identity += fs::absolute(f).string() + "|" + std::to_string(fs::file_size(f)) + "|" +
                std::to_string(fs::last_write_time(f).time_since_epoch().count()) + "|";
  }
  if (text_field != "text") identity += "field=" + text_field + "|";  // "text": the key corpora had before
  const uint64_t key = tokenizer::fnv1a64(identity + std::to_string(tok.checksum()));
  const std::string dir = cache_dir + "/" + name + "-" + std::to_string(key);
  if (!is_corpus(dir)) {
    encode_corpus(tok, {files, TextFormat::kAuto, text_field, dir, 0}, "encode " + name);
  }
  return std::make_shared<const Corpus>(dir, path);
}

Corpus::Corpus(const std::string& dir, std::string source) : dir_(dir), source_(std::move(source)) {
  if (!is_corpus(dir)) throw InputError(dir + ": not a token corpus (no header.json); encode one with lmkit-tokenize encode");
  const std::string hp = dir + "/header.json";
  header_ = load_json_file(hp);
  ConfigReader r(header_, hp);
  std::string format, dtype, family;
  uint64_t checksum = 0;
  Json sources;
  r.require("format", format);
  check_input(format == "lmkit-corpus-1", hp + ": unknown corpus format '" + format + "'");
  r.get_choice("dtype", dtype, {"uint16", "uint32"});
  r.require("vocab_size", vocab_size_);
  r.require("tokenizer_checksum", checksum);
  r.get("tokenizer_family", family);
  r.require("tokens", num_tokens_);
  r.require("sentences", num_sentences_);
  r.require("documents", num_documents_);
  r.get("sources", sources);
  r.finish();
  wide_ = dtype == "uint32";
  // Counts whose byte sizes cannot overflow (2^40 tokens is 4 TiB of uint32).
  constexpr int64_t kMaxCount = int64_t{1} << 40;
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"tokens", num_tokens_}, {"sentences", num_sentences_},
                                {"documents", num_documents_}}) {
    check_input(n >= 0 && n <= kMaxCount, hp + ": '" + name + "' = " + std::to_string(n) + " is not a count (damaged corpus)");
  }
  check_input(vocab_size_ >= 1 && vocab_size_ <= (wide_ ? (int64_t{1} << 32) : (int64_t{1} << 16)),
              hp + ": 'vocab_size' = " + std::to_string(vocab_size_) + " does not fit dtype " + dtype + " (damaged corpus)");
  tokens_file_ = MappedFile(dir + "/tokens.bin");
  sentences_file_ = MappedFile(dir + "/sentences.bin");
  documents_file_ = MappedFile(dir + "/documents.bin");
  auto expect = [&](const MappedFile& f, uint64_t bytes, const char* name) {
    if (f.size() != bytes) {
      throw InputError(dir + "/" + name + ": " + std::to_string(f.size()) + " bytes, header.json implies " +
                       std::to_string(bytes) + " (damaged corpus)");
    }
  };
  expect(tokens_file_, static_cast<uint64_t>(num_tokens_) * (wide_ ? 4 : 2), "tokens.bin");
  expect(sentences_file_, static_cast<uint64_t>(num_sentences_ + 1) * 8, "sentences.bin");
  expect(documents_file_, static_cast<uint64_t>(num_documents_ + 1) * 8, "documents.bin");
  tokens16_ = reinterpret_cast<const uint16_t*>(tokens_file_.data());
  tokens32_ = reinterpret_cast<const uint32_t*>(tokens_file_.data());
  sentences_ = reinterpret_cast<const uint64_t*>(sentences_file_.data());
  documents_ = reinterpret_cast<const uint64_t*>(documents_file_.data());
  // The whole of both indexes and every token id, once, here: readers then index without checks.
  check_index(sentences_, num_sentences_, static_cast<uint64_t>(num_tokens_), "sentences.bin", "tokens");
  check_index(documents_, num_documents_, static_cast<uint64_t>(num_sentences_), "documents.bin", "sentences");
  check_input(num_tokens_ > 0, dir + ": the corpus is empty");
  const size_t n = static_cast<size_t>(num_tokens_);
  const size_t worst = wide_ ? static_cast<size_t>(std::max_element(tokens32_, tokens32_ + n) - tokens32_)
                             : static_cast<size_t>(std::max_element(tokens16_, tokens16_ + n) - tokens16_);
  const int64_t max_id = wide_ ? tokens32_[worst] : tokens16_[worst];
  if (max_id >= vocab_size_) {
    throw InputError(dir + "/tokens.bin: token " + std::to_string(worst) + " is id " + std::to_string(max_id) +
                     ", outside the vocabulary of " + std::to_string(vocab_size_) + " (damaged corpus)");
  }
}

void Corpus::check_index(const uint64_t* index, int64_t entries, uint64_t total, const char* name, const char* unit) const {
  // entries + 1 offsets: 0, non-decreasing, ending at the total the header gives.
  auto damaged = [&](const std::string& what) { throw InputError(dir_ + "/" + name + ": " + what + " (damaged corpus)"); };
  if (index[0] != 0) damaged("the first offset is " + std::to_string(index[0]) + ", not 0");
  for (int64_t i = 1; i <= entries; ++i) {
    if (index[i] < index[i - 1] || index[i] > total) {
      damaged("offset " + std::to_string(i) + " is " + std::to_string(index[i]) + " after " + std::to_string(index[i - 1]) +
              " (offsets must grow, up to " + std::to_string(total) + " " + unit + ")");
    }
  }
  if (index[entries] != total) {
    damaged("ends at " + std::to_string(index[entries]) + " " + unit + ", header.json has " + std::to_string(total));
  }
}

void Corpus::append_tokens(int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  out.reserve(out.size() + static_cast<size_t>(end - begin));
  if (wide_) out.insert(out.end(), tokens32_ + begin, tokens32_ + end);
  else out.insert(out.end(), tokens16_ + begin, tokens16_ + end);
}

void Corpus::check_tokenizer(const tokenizer::Tokenizer& tok) const {
  if (header_["tokenizer_checksum"].get<uint64_t>() != tok.checksum()) {
    throw InputError(dir_ + ": the corpus was encoded with a different tokenizer than the one given "
                            "(checksums differ); re-encode it with lmkit-tokenize encode");
  }
}

void Corpus::check_vocab(int64_t vocab_size, const std::string& model) const {
  if (vocab_size_ > vocab_size) {
    throw InputError(dir_ + ": the corpus vocabulary (" + std::to_string(vocab_size_) + ") exceeds " + model + "'s (" +
                     std::to_string(vocab_size) + ")");
  }
}

}  // namespace lmkit::data
