#include "lmkit/tokenizer/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include "lmkit/core/error.h"

namespace lmkit::tokenizer::unicode {

namespace {

// The code point a well-formed UTF-8 sequence starting at s[i] encodes, and its length;
// 0 for an ill-formed one (a bad lead or continuation byte, a cut sequence, an overlong
// form, a surrogate, a value past U+10FFFF).
int decode_one(std::string_view s, size_t i, char32_t& c) {
  const auto b = static_cast<unsigned char>(s[i]);
  const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) return 0;
  c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto cb = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((cb & 0xC0) != 0x80) return 0;
    c = (c << 6) | (cb & 0x3F);
  }
  const bool overlong = (len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000);
  return overlong || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) ? 0 : len;
}

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int len = decode_one(s, i, c);
    out.push_back(len > 0 ? c : 0xFFFD);  // an ill-formed byte becomes U+FFFD on its own
    i += len > 0 ? static_cast<size_t>(len) : 1;
  }
  return out;
}

size_t count_invalid_utf8(std::string_view s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int len = decode_one(s, i, c);
    if (len > 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    if (s.size() - i < 4) break;  // possibly the start of a sequence the sample cut
    ++bad, ++i;
  }
  return bad;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // The longest valid prefix of a sequence (WHATWG / Rust): the second byte's range depends on the first.
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    size_t k = 1;
    for (; len && k < static_cast<size_t>(len) && i + k < s.size(); ++k) {
      const auto cb = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (cb < lo || cb > hi) : (cb & 0xC0) != 0x80) break;
    }
    if (len && k == static_cast<size_t>(len)) {
      out.append(s.substr(i, k));
    } else {
      out += "\xEF\xBF\xBD";
      if (!len) k = 1;
    }
    i += k;
  }
  return out;
}

bool is_whitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

bool is_other(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_UNASSIGNED: case U_PRIVATE_USE_CHAR: case U_SURROGATE: return true;
    default: return false;
  }
}

bool is_punctuation(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0; }

bool is_mark_nonspacing(char32_t c) { return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK; }

std::u32string nfd(std::u32string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status)) throw RuntimeError(std::string("ICU: no NFD normalizer (") + u_errorName(status) + ")");
  const icu::UnicodeString in = icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(text.data()),
                                                              static_cast<int32_t>(text.size()));
  if (n->isNormalized(in, status)) return std::u32string(text);
  const icu::UnicodeString out = n->normalize(in, status);
  if (U_FAILURE(status)) throw RuntimeError(std::string("ICU: NFD failed (") + u_errorName(status) + ")");
  std::u32string result(static_cast<size_t>(out.countChar32()), U'\0');
  out.toUTF32(reinterpret_cast<UChar32*>(result.data()), static_cast<int32_t>(result.size()), status);
  return result;
}

std::u32string lowercase(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    // One code point at a time, so no context-dependent rule (final sigma) applies, as in Rust.
    UChar src[2], dst[8];
    int32_t n = 0;
    UBool error = false;
    U16_APPEND(src, n, 2, static_cast<UChar32>(c), error);
    UErrorCode status = U_ZERO_ERROR;
    const int32_t m = u_strToLower(dst, 8, src, n, "", &status);
    if (U_FAILURE(status) || error) {
      out.push_back(c);
      continue;
    }
    for (int32_t k = 0; k < m;) {
      UChar32 lc;
      U16_NEXT(dst, k, m, lc);
      out.push_back(static_cast<char32_t>(lc));
    }
  }
  return out;
}

}  // namespace lmkit::tokenizer::unicode
