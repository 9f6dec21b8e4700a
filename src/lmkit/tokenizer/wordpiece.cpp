// BERT's WordPiece, as HuggingFace's tokenizers runs it: BertNormalizer,
// BertPreTokenizer, greedy longest-match-first WordPiece, WordPiece decoder
// (tokenizers/src/{normalizers/bert.rs, pre_tokenizers/bert.rs, models/wordpiece,
// decoders/wordpiece.rs}). Unicode facts come from ICU (unicode.h).
#include <unordered_map>

#include "lmkit/core/error.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/unicode.h"

namespace lmkit::tokenizer {
namespace {

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BertNormalizer's whitespace: tab, newline and carriage return count although Unicode calls them controls.
bool bert_whitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || unicode::is_whitespace(c); }
bool bert_control(char32_t c) { return !(c == '\t' || c == '\n' || c == '\r') && unicode::is_other(c); }
bool bert_punctuation(char32_t c) {
  const bool ascii = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return ascii || unicode::is_punctuation(c);
}

// The cleanup HF's WordPiece decoder applies to each token.
std::string cleanup(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    const std::string f = from, t = to;
    for (size_t pos = 0; (pos = s.find(f, pos)) != std::string::npos; pos += t.size()) s.replace(pos, f.size(), t);
  }
  return s;
}

class WordPiece : public Backend {
 public:
  WordPiece(std::vector<std::string> vocab, const WordPieceOptions& o) : vocab_(std::move(vocab)), o_(o) {
    for (size_t id = 0; id < vocab_.size(); ++id) {
      if (!vocab_[id].empty()) ids_.emplace(vocab_[id], static_cast<int32_t>(id));
    }
    unk_ = id_of(o_.unk_token);
    check_input(unk_ >= 0, "WordPiece: the unknown token '" + o_.unk_token + "' is not in the vocabulary");
  }

  std::string format() const override { return "wordpiece"; }
  int64_t size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::string piece(int32_t id) const override { return vocab_.at(static_cast<size_t>(id)); }
  int32_t id_of(std::string_view piece) const override {
    auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? -1 : it->second;
  }
  bool starts_word(int32_t id) const override { return vocab_.at(static_cast<size_t>(id)).rfind(o_.prefix, 0) != 0; }

  void encode(std::string_view text, std::vector<int32_t>& out) const override {
    std::u32string s = unicode::decode_utf8(text);
    if (o_.normalize) s = normalize(s);
    // BertPreTokenizer: split on white space (dropped) and around each punctuation character.
    std::u32string word;
    auto flush = [&] {
      if (!word.empty()) encode_word(word, out);
      word.clear();
    };
    for (char32_t c : s) {
      if (unicode::is_whitespace(c)) {
        flush();
      } else if (bert_punctuation(c)) {
        flush();
        word.push_back(c);
        flush();
      } else {
        word.push_back(c);
      }
    }
    flush();
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string token = piece(ids[i]);
      if (i != 0) {
        if (token.rfind(o_.prefix, 0) == 0) token.erase(0, o_.prefix.size());
        else token.insert(0, " ");
      }
      out += o_.decoder_cleanup ? cleanup(std::move(token)) : token;
    }
    return out;
  }

 private:
  std::u32string normalize(const std::u32string& in) const {
    std::u32string s;
    s.reserve(in.size());
    for (char32_t c : in) {
      if (o_.clean_text && (c == 0 || c == 0xFFFD || bert_control(c))) continue;
      if (o_.clean_text && bert_whitespace(c)) c = ' ';
      if (o_.handle_chinese_chars && is_chinese_char(c)) {
        s.push_back(' '), s.push_back(c), s.push_back(' ');
      } else {
        s.push_back(c);
      }
    }
    if (o_.strip_accents) {
      std::u32string stripped;
      for (char32_t c : unicode::nfd(s)) {
        if (!unicode::is_mark_nonspacing(c)) stripped.push_back(c);
      }
      s = std::move(stripped);
    }
    if (o_.lowercase) s = unicode::lowercase(s);
    return s;
  }

  // Greedy longest match first; a word with any unmatched part is one [UNK].
  void encode_word(const std::u32string& word, std::vector<int32_t>& out) const {
    if (static_cast<int64_t>(word.size()) > o_.max_input_chars_per_word) {
      out.push_back(unk_);
      return;
    }
    const size_t mark = out.size();
    size_t start = 0;
    while (start < word.size()) {
      int32_t found = -1;
      size_t end = word.size();
      for (; end > start; --end) {
        std::string sub = start > 0 ? o_.prefix : std::string();
        sub += unicode::encode_utf8(std::u32string_view(word).substr(start, end - start));
        found = id_of(sub);
        if (found >= 0) break;
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back(unk_);
        return;
      }
      out.push_back(found);
      start = end;
    }
  }

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  WordPieceOptions o_;
  int32_t unk_ = -1;
};

}  // namespace

std::shared_ptr<const Backend> make_wordpiece(std::vector<std::string> vocab, const WordPieceOptions& options) {
  return std::make_shared<WordPiece>(std::move(vocab), options);
}

}  // namespace lmkit::tokenizer
