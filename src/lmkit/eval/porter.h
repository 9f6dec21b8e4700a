// The Porter stemmer as NLTK 3.x runs it by default (PorterStemmer(), mode
// NLTK_EXTENSIONS): the stemmer rouge-score's use_stemmer=True applies to every
// token longer than three characters.
#pragma once

#include <string>

namespace lmkit::eval {

/// The stem of a lower-case ASCII word (rouge-score's tokens: [a-z0-9]+), equal to
/// nltk.stem.porter.PorterStemmer().stem(word); checked against NLTK 3.10.4 on the
/// words of tests/fixtures/generation/porter.json.
std::string porter_stem(const std::string& word);

}  // namespace lmkit::eval
