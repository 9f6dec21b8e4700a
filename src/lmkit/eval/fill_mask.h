// What a pretrained masked LM knows: HF's pipeline("fill-mask") — the most likely tokens
// for each mask of a text, with their probabilities — and LAMA-style cloze probes
// (Petroni et al. 2019): templates with one mask and their answers, scored by precision@1,
// precision@10 and mean reciprocal rank of the answer's token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/models/model.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::eval {

struct MaskCandidate {
  int32_t token = 0;
  std::string token_str;  ///< the token decoded alone
  double score = 0;       ///< its probability at the mask (softmax of the logits there)
  std::string sequence;   ///< the text with the mask filled by it (special tokens kept when the text has several masks)
};

/// HF's fill-mask pipeline: `text` encoded with the tokenizer's template, one forward pass,
/// and for each mask token in it (in order) the `top_k` most likely tokens. InputError when
/// the text has no mask token or the tokenizer has none, or `top_k` is not 1 to the vocabulary size.
std::vector<std::vector<MaskCandidate>> fill_mask(models::Model& model, const tokenizer::Tokenizer& tok,
                                                  const std::string& text, int64_t top_k, c10::Device device);

/// The mask as written in a probe's text: "[MASK]" in a template becomes the tokenizer's own mask piece.
std::string with_mask_piece(const std::string& text, const tokenizer::Tokenizer& tok);

/// LAMA-style probes from a TSV (a header "template<TAB>answer", then one probe a line; the
/// template holds "[MASK]" once): the answer's rank among the vocabulary at the mask. As LAMA,
/// an answer must be one token of the vocabulary (with the space before it, as in running
/// text); probes whose answer is several pieces are skipped and counted. Returns precision@1,
/// precision@10, MRR (each over the scored probes), and the counts.
Json cloze_scores(models::Model& model, const tokenizer::Tokenizer& tok, const std::string& probes_tsv, c10::Device device);

}  // namespace lmkit::eval
