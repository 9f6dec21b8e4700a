#include "lmkit/eval/text_to_text.h"

#include <algorithm>

#include "lmkit/eval/metrics.h"

namespace lmkit::eval {

GenerationOptions text_generation_options(int64_t beams, int64_t max_new_tokens, int64_t max_target_length) {
  GenerationOptions g;
  g.search = beams > 1 ? Search::kBeam : Search::kGreedy;
  g.num_beams = beams;
  g.max_new_tokens = max_new_tokens > 0 ? max_new_tokens : max_target_length;
  return g;
}

Json evaluate_text_to_text(models::Model& model, const tokenizer::Tokenizer& tok, const data::Seq2SeqDataset& dataset,
                           const GenerationOptions& options, int64_t batch_size, int32_t pad_id, c10::Device device,
                           std::vector<std::string>* predictions, bool rouge_stemmer) {
  auto texts = generate_texts(model, tok, dataset.prompts(), options, batch_size, pad_id, device);
  const GenerationScores s = generation_scores(texts, dataset.references(), rouge_stemmer);
  if (predictions) *predictions = std::move(texts);
  return {{"bleu", s.bleu},
          {"exact_match", s.exact_match},
          {"f1", s.f1},
          {"rouge1", s.rouge1},
          {"rouge2", s.rouge2},
          {"rougeL", s.rougeL},
          {"rouge_stemmer", rouge_stemmer},
          {"examples", s.examples},
          {"truncated_sources", dataset.truncated_sources()},
          {"truncated_targets", dataset.truncated_targets()}};
}

std::string predictions_lines(const std::vector<std::string>& predictions) {
  std::string out;
  for (std::string p : predictions) {
    std::replace(p.begin(), p.end(), '\n', ' ');
    std::replace(p.begin(), p.end(), '\r', ' ');
    out += p + "\n";
  }
  return out;
}

}  // namespace lmkit::eval
