// Byte-level BPE, as HuggingFace's tokenizers runs GPT-2's: the ByteLevel
// pre-tokenizer (a regex split, then every byte mapped to a printable
// character), BPE merges by rank, and the ByteLevel decoder
// (tokenizers/src/{pre_tokenizers/byte_level.rs, models/bpe/word.rs}).
// The regex runs on PCRE2 with Unicode properties.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <map>
#include <unordered_map>

#include "lmkit/core/error.h"
#include "lmkit/tokenizer/backend.h"
#include "lmkit/tokenizer/unicode.h"

namespace lmkit::tokenizer {

const char* const kGpt2SplitPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + n.
std::array<char32_t, 256> byte_to_char() {
  std::array<char32_t, 256> map{};
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
  }
  return map;
}

class ByteLevelBpe : public Backend {
 public:
  ByteLevelBpe(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
               const BpeOptions& o)
      : vocab_(std::move(vocab)), o_(o) {
    for (size_t id = 0; id < vocab_.size(); ++id) {
      if (!vocab_[id].empty()) ids_.emplace(vocab_[id], static_cast<int32_t>(id));
    }
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [a, b] = merges[rank];
      const int32_t ia = id_of(a), ib = id_of(b), merged = id_of(a + b);
      if (ia < 0 || ib < 0 || merged < 0) {
        throw InputError("BPE merge " + std::to_string(rank + 1) + " ('" + a + "' '" + b + "') uses a token that is not in the vocabulary");
      }
      merges_.emplace(key(ia, ib), std::make_pair(static_cast<int32_t>(rank), merged));
    }
    if (!o_.unk_token.empty()) {
      unk_ = id_of(o_.unk_token);
      check_input(unk_ >= 0, "BPE: the unknown token '" + o_.unk_token + "' is not in the vocabulary");
    }
    const auto map = byte_to_char();
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append_utf8(s, map[static_cast<size_t>(b)]);
      byte_chars_[static_cast<size_t>(b)] = s;
      char_bytes_[map[static_cast<size_t>(b)]] = static_cast<char>(b);
    }
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(o_.split_pattern.c_str()), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    if (!re) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw InputError("pre-tokenizer regex '" + o_.split_pattern + "': " + reinterpret_cast<const char*>(message) +
                       " at offset " + std::to_string(offset));
    }
    regex_ = std::shared_ptr<pcre2_code>(re, pcre2_code_free);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // best effort: without JIT it still matches
  }

  std::string format() const override { return "byte-level-bpe"; }
  int64_t size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::string piece(int32_t id) const override { return vocab_.at(static_cast<size_t>(id)); }
  int32_t id_of(std::string_view piece) const override {
    auto it = ids_.find(std::string(piece));
    return it == ids_.end() ? -1 : it->second;
  }
  // "Ġ" (the byte-level form of a space) starts a word.
  bool starts_word(int32_t id) const override { return vocab_.at(static_cast<size_t>(id)).rfind("\xC4\xA0", 0) == 0; }

  void encode(std::string_view raw, std::vector<int32_t>& out) const override {
    std::string text;
    if (o_.add_prefix_space && !raw.empty() && raw[0] != ' ') text = " ";
    text.append(raw);
    // Isolated split: every match is a word, and so is any text between matches.
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex_.get(), nullptr);
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> guard(md, pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    while (pos < text.size()) {
      const int rc = pcre2_match(regex_.get(), subject, text.size(), pos, 0, md, nullptr);
      if (rc < 0) {
        if (rc != PCRE2_ERROR_NOMATCH) throw RuntimeError("pre-tokenizer regex failed (PCRE2 error " + std::to_string(rc) + ")");
        encode_word(std::string_view(text).substr(pos), out);
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[0] > pos) encode_word(std::string_view(text).substr(pos, ov[0] - pos), out);
      if (ov[1] > ov[0]) {
        encode_word(std::string_view(text).substr(ov[0], ov[1] - ov[0]), out);
        pos = ov[1];
      } else {  // an empty match: step over one character
        size_t next = ov[0] + 1;
        while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
        encode_word(std::string_view(text).substr(ov[0], next - ov[0]), out);
        pos = next;
      }
    }
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      for (char32_t c : unicode::decode_utf8(piece(id))) {
        auto it = char_bytes_.find(c);
        if (it != char_bytes_.end()) bytes.push_back(it->second);
        else unicode::append_utf8(bytes, c);
      }
    }
    return unicode::utf8_lossy(bytes);
  }

 private:
  static uint64_t key(int32_t a, int32_t b) { return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b); }

  void encode_word(std::string_view word, std::vector<int32_t>& out) const {
    std::string mapped;
    for (unsigned char b : word) mapped += byte_chars_[b];
    if (o_.ignore_merges) {
      const int32_t whole = id_of(mapped);
      if (whole >= 0) {
        out.push_back(whole);
        return;
      }
    }
    // One symbol per character; characters outside the vocabulary become [UNK] or are dropped (HF).
    std::vector<int32_t> symbols;
    for (size_t i = 0; i < mapped.size();) {
      size_t len = 1;
      while (i + len < mapped.size() && (static_cast<unsigned char>(mapped[i + len]) & 0xC0) == 0x80) ++len;
      const int32_t id = id_of(std::string_view(mapped).substr(i, len));
      if (id >= 0) symbols.push_back(id);
      else if (unk_ >= 0) symbols.push_back(unk_);
      i += len;
    }
    // Repeatedly merge the pair of lowest rank, the leftmost among equals (HF's priority queue).
    while (symbols.size() > 1) {
      int32_t best_rank = INT32_MAX, merged = -1;
      size_t at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        auto it = merges_.find(key(symbols[i], symbols[i + 1]));
        if (it != merges_.end() && it->second.first < best_rank) best_rank = it->second.first, merged = it->second.second, at = i;
      }
      if (merged < 0) break;
      symbols[at] = merged;
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    out.insert(out.end(), symbols.begin(), symbols.end());
  }

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged id)
  BpeOptions o_;
  int32_t unk_ = -1;
  std::array<std::string, 256> byte_chars_;
  std::unordered_map<char32_t, char> char_bytes_;
  std::shared_ptr<pcre2_code> regex_;
};

}  // namespace

std::shared_ptr<const Backend> make_byte_level_bpe(std::vector<std::string> vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   const BpeOptions& options) {
  return std::make_shared<ByteLevelBpe>(std::move(vocab), merges, options);
}

}  // namespace lmkit::tokenizer
