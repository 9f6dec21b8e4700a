#include "lmkit/eval/fill_mask.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/text_input.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

namespace {

// The masked LM's probabilities (M, V) at the mask positions of `ids`, and those positions.
at::Tensor mask_probabilities(models::Model& model, const std::vector<int32_t>& ids, const std::vector<int64_t>& masks,
                              c10::Device device) {
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  const bool full = model.full_logits;
  model.full_logits = true;
  Batch b;
  b.input_ids = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0).to(device);
  const Output out = model.forward(b);
  model.full_logits = full;
  check_input(out.logits.defined() && out.logits.dim() == 3, "--fill-mask needs a masked LM's logits (B, T, V)");
  const at::Tensor at_masks = out.logits[0].index_select(0, at::tensor(masks, at::kLong).to(out.logits.device()));
  return at_masks.to(at::kFloat).softmax(-1).cpu();  // (M, V)
}

std::vector<int64_t> mask_positions(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok, const std::string& text) {
  check_input(tok.specials().mask >= 0, "the checkpoint's tokenizer has no mask token, so it cannot fill masks");
  std::vector<int64_t> masks;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == tok.specials().mask) masks.push_back(static_cast<int64_t>(i));
  }
  check_input(!masks.empty(), "'" + text.substr(0, 80) + "': no " + tok.piece(tok.specials().mask) + " in the text");
  return masks;
}

}  // namespace

std::string with_mask_piece(const std::string& text, const tokenizer::Tokenizer& tok) {
  const std::string piece = tok.piece(tok.specials().mask);
  std::string out = text;
  for (size_t at = out.find("[MASK]"); at != std::string::npos; at = out.find("[MASK]", at + piece.size())) {
    out.replace(at, 6, piece);
  }
  return out;
}

std::vector<std::vector<MaskCandidate>> fill_mask(models::Model& model, const tokenizer::Tokenizer& tok,
                                                  const std::string& text, int64_t top_k, c10::Device device) {
  const std::vector<int32_t> ids = tok.encode_pair(text).ids;
  const std::vector<int64_t> masks = mask_positions(ids, tok, text);
  const at::Tensor probs = mask_probabilities(model, ids, masks, device);
  // As HF's pipeline (torch's topk refuses a k past the vocabulary), not clamped to it.
  check_input(top_k >= 1 && top_k <= probs.size(1), "--top-k " + std::to_string(top_k) + ": --fill-mask lists 1 to " +
                                                        std::to_string(probs.size(1)) + " tokens a mask (the model's vocabulary)");
  const auto [values, tokens] = probs.topk(top_k, -1);
  std::vector<std::vector<MaskCandidate>> out(masks.size());
  for (size_t m = 0; m < masks.size(); ++m) {
    for (int64_t k = 0; k < values.size(1); ++k) {
      MaskCandidate c;
      c.token = static_cast<int32_t>(tokens[static_cast<int64_t>(m)][k].item<int64_t>());
      c.score = values[static_cast<int64_t>(m)][k].item<double>();
      c.token_str = tok.decode({c.token}, /*keep_special=*/true);
      std::vector<int32_t> filled = ids;
      filled[static_cast<size_t>(masks[m])] = c.token;
      c.sequence = tok.decode(filled, /*keep_special=*/masks.size() > 1);  // as HF's pipeline
      out[m].push_back(std::move(c));
    }
  }
  return out;
}

Json cloze_scores(models::Model& model, const tokenizer::Tokenizer& tok, const std::string& probes_tsv, c10::Device device) {
  check_readable_file(probes_tsv);  // a directory read as an empty file said "expected the header"
  // As every text input: gzip or zstd decompressed, a Windows editor's byte-order mark (the header was
  // "expected") and '\r' line ends (the answer "the\r" is no token) left out, a binary file named.
  const std::vector<std::string> lines = data::read_text_lines(probes_tsv);
  size_t next = 0;
  auto next_line = [&](std::string& line) {
    if (next == lines.size()) return false;
    line = lines[next++];
    return true;
  };
  std::string line;
  next_line(line);
  check_input(line == "template\tanswer", probes_tsv + ":1: expected the header 'template<TAB>answer'");
  int64_t scored = 0, multi_piece = 0, at1 = 0, at10 = 0, number = 1;
  double reciprocal = 0;
  while (next_line(line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = probes_tsv + ":" + std::to_string(number);
    const size_t tab = line.find('\t');
    check_input(tab != std::string::npos && line.find('\t', tab + 1) == std::string::npos,
                where + ": expected a template and an answer separated by one tab");
    const std::string templ = line.substr(0, tab), answer = line.substr(tab + 1);
    const size_t first = templ.find("[MASK]");
    check_input(first != std::string::npos && templ.find("[MASK]", first + 1) == std::string::npos,
                where + ": the template must hold [MASK] exactly once");
    check_input(answer.find_first_not_of(" ") != std::string::npos, where + ": the answer is empty");
    // The answer as running text has it: a word after a space (LAMA's single-token objects).
    const std::vector<int32_t> pieces = tok.encode("a " + answer);
    const std::vector<int32_t> prefix = tok.encode("a");
    if (pieces.size() != prefix.size() + 1) {
      ++multi_piece;
      continue;
    }
    const std::vector<int32_t> ids = tok.encode_pair(with_mask_piece(templ, tok)).ids;
    at::Tensor probs;
    try {
      probs = mask_probabilities(model, ids, mask_positions(ids, tok, templ), device)[0];  // (V)
    } catch (const Error& e) {
      if (e.code() != ExitCode::kInput) throw;
      throw InputError(where + ": " + e.what());  // e.g. a template longer than the model's positions
    }
    const int64_t rank = 1 + probs.gt(probs[pieces.back()]).sum().item<int64_t>();
    ++scored;
    at1 += rank == 1;
    at10 += rank <= 10;
    reciprocal += 1.0 / static_cast<double>(rank);
  }
  check_input(scored + multi_piece > 0, probes_tsv + ": no probes (only the header 'template<TAB>answer')");
  check_input(scored > 0, probes_tsv + ": no probe whose answer is one token of this vocabulary (" +
                              std::to_string(multi_piece) + " skipped: answers of several pieces)");
  const double n = static_cast<double>(scored);
  return {{"precision_at_1", at1 / n}, {"precision_at_10", at10 / n}, {"mrr", reciprocal / n}, {"probes", scored},
          {"skipped_multi_piece", multi_piece}};
}

}  // namespace lmkit::eval
