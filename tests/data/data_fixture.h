// A tokenizer and token corpus per family, built once per test process from
// the bundled WikiText-2 sample (tokenizer trained on the 110 KB valid file,
// corpus encoded from the 1 MB train file: ~300k tokens).
#pragma once

#include <map>
#include <memory>

#include "lmkit/data/corpus.h"
#include "lmkit/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmkit::test {

struct DataFixture {
  std::shared_ptr<TempDir> dir = std::make_shared<TempDir>();
  std::shared_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const data::Corpus> corpus;
  std::string corpus_path;
};

inline std::string sample(const std::string& name) { return source_dir() + "/data/wikitext-2-sample/" + name; }

inline const DataFixture& data_fixture(tokenizer::Family family) {
  static std::map<tokenizer::Family, DataFixture> cache;
  auto it = cache.find(family);
  if (it != cache.end()) return it->second;
  DataFixture f;
  tokenizer::TrainOptions o;
  o.inputs = {sample("valid.txt")};
  o.vocab_size = 2000;
  o.family = family;
  o.output = *f.dir / "tok.model";
  f.tok = std::make_shared<tokenizer::Tokenizer>(tokenizer::Tokenizer::train(o));
  f.corpus_path = *f.dir / "corpus";
  data::encode_corpus(*f.tok, {{sample("train.txt")}, data::TextFormat::kAuto, "text", f.corpus_path, 2});
  f.corpus = std::make_shared<const data::Corpus>(f.corpus_path);
  return cache.emplace(family, std::move(f)).first->second;
}

}  // namespace lmkit::test
