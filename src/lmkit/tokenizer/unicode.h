// The Unicode facts HuggingFace's tokenizers pipelines rely on (general
// categories, White_Space, NFD, full lower-casing), from ICU, and UTF-8 coding.
#pragma once

#include <string>
#include <string_view>

namespace lmkit::tokenizer::unicode {

/// Code points of UTF-8 text; each invalid byte becomes U+FFFD.
std::u32string decode_utf8(std::string_view text);
/// The bytes decode_utf8 would replace by U+FFFD, less a sequence cut off at the very end (a
/// sample of a longer text may end inside one).
size_t count_invalid_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(std::u32string_view text);
/// Rust's String::from_utf8_lossy: each maximal invalid sequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t c);        ///< the White_Space property (Rust's char::is_whitespace)
bool is_other(char32_t c);             ///< general category C: Cc Cf Cn Co Cs
bool is_punctuation(char32_t c);       ///< general category P
bool is_mark_nonspacing(char32_t c);   ///< general category Mn
/// Canonical decomposition (NFD).
std::u32string nfd(std::u32string_view text);
/// Full lower-case mapping of each code point on its own (no context: Rust's char::to_lowercase).
std::u32string lowercase(std::u32string_view text);

}  // namespace lmkit::tokenizer::unicode
