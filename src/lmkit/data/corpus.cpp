#include "lmkit/data/corpus.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/runtime.h"
#include "lmkit/io/checkpoint.h"

namespace fs = std::filesystem;

namespace lmkit::data {

namespace {

template <typename T>
void write_array(const std::string& path, const std::vector<T>& values) {
  AtomicFile f(path);
  f.write(values.data(), values.size() * sizeof(T));
  f.commit();
}

// Every sentence of the inputs, in order, and where each document starts (with the end).
std::vector<std::string> collect_sentences(const EncodeOptions& o, std::vector<uint64_t>& doc_starts) {
  std::vector<std::string> sentences;
  for (const auto& path : o.inputs) {
    auto docs = read_documents(path, o.format, o.text_field);
    for (auto& d : docs) {
      doc_starts.push_back(sentences.size());
      for (auto& s : d.sentences) sentences.push_back(std::move(s));
    }
  }
  if (sentences.empty()) throw InputError(join_names(o.inputs) + ": no text to encode (empty corpus)");
  doc_starts.push_back(sentences.size());
  return sentences;
}

// Encodes in parallel: each thread takes whole chunks, results are joined in
// order, so the output is the same whatever the thread count.
std::vector<std::vector<int32_t>> encode_all(const tokenizer::Tokenizer& tok, const std::vector<std::string>& sentences,
                                             int threads, ProgressBar* progress) {
  const size_t chunk = 1024, num_chunks = (sentences.size() + chunk - 1) / chunk;
  std::vector<std::vector<int32_t>> encoded(sentences.size());
  std::atomic<size_t> next{0}, done{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      for (size_t c; (c = next.fetch_add(1)) < num_chunks;) {
        for (size_t i = c * chunk; i < std::min(sentences.size(), (c + 1) * chunk); ++i) encoded[i] = tok.encode(sentences[i]);
        done.fetch_add(1);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  if (progress) {
    while (done.load() < num_chunks && !failure) {
      progress->update(static_cast<int64_t>(std::min(done.load() * chunk, sentences.size())));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress) {
    progress->update(static_cast<int64_t>(sentences.size()));
    progress->finish();
  }
  return encoded;
}

// tokens.bin in the header's dtype: uint16 while the vocabulary fits, else uint32.
void write_tokens(const std::string& path, const std::vector<std::vector<int32_t>>& encoded, bool wide) {
  AtomicFile f(path);
  std::vector<uint16_t> narrow;
  std::vector<uint32_t> full;
  for (const auto& e : encoded) {
    if (wide) {
      full.assign(e.begin(), e.end());
      f.write(full.data(), full.size() * sizeof(uint32_t));
    } else {
      narrow.assign(e.begin(), e.end());
      f.write(narrow.data(), narrow.size() * sizeof(uint16_t));
    }
  }
  f.commit();
}

}  // namespace

Json encode_corpus(const tokenizer::Tokenizer& tok, const EncodeOptions& o, ProgressBar* progress) {
  check_input(!o.inputs.empty(), "encode: no input files");
  check_input(!o.output.empty(), "encode: no output corpus");
  std::vector<uint64_t> doc_starts;
  const std::vector<std::string> sentences = collect_sentences(o, doc_starts);
  const auto encoded = encode_all(tok, sentences, resolve_threads(o.threads), progress);
  std::vector<uint64_t> sentence_starts{0};
  uint64_t total = 0;
  for (const auto& e : encoded) sentence_starts.push_back(total += e.size());
  const bool wide = tok.vocab_size() > 65535;
  Json header = {{"format", "lmkit-corpus-1"},
                 {"dtype", wide ? "uint32" : "uint16"},
                 {"vocab_size", tok.vocab_size()},
                 {"tokenizer_checksum", tok.checksum()},
                 {"tokenizer_family", tok.family()},
                 {"tokens", total},
                 {"sentences", sentences.size()},
                 {"documents", doc_starts.size() - 1},
                 {"sources", o.inputs}};
  io::write_directory_atomic(o.output, [&](const std::string& tmp) {
    write_tokens(tmp + "/tokens.bin", encoded, wide);
    write_array(tmp + "/sentences.bin", sentence_starts);
    write_array(tmp + "/documents.bin", doc_starts);
    save_json_file(tmp + "/header.json", header);
  });
  return header;
}

bool is_corpus(const std::string& path) { return fs::is_directory(path) && fs::exists(path + "/header.json"); }

std::shared_ptr<const Corpus> open_corpus(const std::string& path, const tokenizer::Tokenizer& tok,
                                          const std::string& cache_dir, const std::string& name) {
  if (is_corpus(path)) {
    auto c = std::make_shared<const Corpus>(path);
    c->check_tokenizer(tok);
    return c;
  }
  if (!fs::is_regular_file(path)) throw InputError(path + ": no such text file or corpus directory");
  const auto stamp = fs::last_write_time(path).time_since_epoch().count();
  const uint64_t key = tokenizer::fnv1a64(fs::absolute(path).string() + "|" + std::to_string(fs::file_size(path)) + "|" +
                                          std::to_string(stamp) + "|" + std::to_string(tok.checksum()));
  const std::string dir = cache_dir + "/" + name + "-" + std::to_string(key);
  if (!is_corpus(dir)) {
    ProgressBar bar(0, "encode " + name);
    encode_corpus(tok, {{path}, TextFormat::kAuto, "text", dir, 0}, &bar);
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
