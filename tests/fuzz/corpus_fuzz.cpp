// Fuzzes the token-corpus reader: header.json, tokens.bin, sentences.bin and
// documents.bin as four parts of the input (fuzz_util.h's separator), then walks
// every document, sentence and token the way the datasets do.
#include "fuzz_util.h"
#include "lmkit/data/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = lmkit::fuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 4);
  const auto dir = lmkit::fuzz::scratch() / "corpus";
  std::filesystem::create_directories(dir);
  const char* names[] = {"header.json", "tokens.bin", "sentences.bin", "documents.bin"};
  for (size_t i = 0; i < 4; ++i) lmkit::fuzz::write_file(dir / names[i], parts[i]);
  lmkit::fuzz::expect_input_errors([&] {
    lmkit::data::Corpus corpus(dir.string());
    corpus.check_vocab(corpus.vocab_size(), "fuzz");
    std::vector<int32_t> tokens;
    for (int64_t d = 0; d < corpus.num_documents(); ++d) {
      for (int64_t s = corpus.document_first_sentence(d); s < corpus.document_end_sentence(d); ++s) {
        tokens.clear();
        corpus.append_tokens(corpus.sentence_begin(s), corpus.sentence_end(s), tokens);
        for (int32_t id : tokens) {
          if (id < 0 || id >= corpus.vocab_size()) std::abort();  // validated at open
        }
      }
    }
  });
  return 0;
}
