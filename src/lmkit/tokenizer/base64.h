// Base64 (RFC 4648, with padding): SentencePiece's precompiled normalizer in tokenizer.json.
#pragma once

#include <string>

namespace lmkit::tokenizer {

std::string base64_encode(const std::string& bytes);
/// The bytes of `text`; InputError naming `what` when it is not base64.
std::string base64_decode(const std::string& text, const std::string& what);

}  // namespace lmkit::tokenizer
