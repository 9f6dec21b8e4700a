#include "lmkit/eval/generation.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>
#include <cmath>
#include <limits>

#include "lmkit/core/error.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/stop.h"
#include "lmkit/models/checks.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

at::Tensor filter_logits(const at::Tensor& logits, int64_t top_k, double top_p) {
  at::Tensor out = logits.clone();
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (top_k > 0 && top_k < out.size(-1)) {
    at::Tensor kth = std::get<0>(out.topk(top_k, -1)).select(-1, top_k - 1).unsqueeze(-1);  // (B, 1)
    out.masked_fill_(out.lt(kth), neg_inf);
  }
  if (top_p < 1.0) {
    auto [sorted, order] = out.sort(-1, /*descending=*/false);
    at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);  // ascending
    at::Tensor remove = cumulative.le(1.0 - top_p);
    remove.select(-1, -1).fill_(false);  // the most likely token always stays
    out.masked_fill_(remove.scatter(-1, order, remove), neg_inf);
  }
  return out;
}

namespace {

at::Tensor first_tokens(const models::GenerationSpec& spec, const at::Tensor& input_ids) {
  if (!spec.encoder_decoder) return input_ids;
  return at::full({input_ids.size(0), 1}, spec.decoder_start_token_id, input_ids.options());
}

std::vector<std::vector<int64_t>> greedy_or_sample(models::Model& model, const at::Tensor& input_ids,
                                                   const at::Tensor& attention_mask, const GenerationOptions& o) {
  const auto spec = model.generation_spec();
  const int64_t b = input_ids.size(0);
  auto session = model.start_decoding(input_ids, attention_mask, o.use_cache);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  std::vector<std::vector<int64_t>> out(b);
  std::vector<bool> done(b, false);
  at::Tensor tokens = first_tokens(spec, input_ids);
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    check_stop("generation");
    at::Tensor logits = session->step(tokens).to(at::kFloat);  // (B, V)
    at::Tensor next;
    if (o.search == Search::kSample) {
      at::Tensor filtered = filter_logits(logits / std::max(o.temperature, 1e-6), o.top_k, o.top_p);
      next = at::multinomial(filtered.softmax(-1).cpu(), 1, false, gen).squeeze(1);  // (B)
    } else {
      next = logits.argmax(-1).cpu();  // (B)
    }
    auto acc = next.accessor<int64_t, 1>();
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      if (!done[i]) {
        out[i].push_back(acc[i]);
        done[i] = o.stop_at_eos && acc[i] == spec.eos_token_id;
      }
      all_done = all_done && done[i];
    }
    if (all_done) break;
    tokens = next.to(input_ids.device()).unsqueeze(1);  // (B, 1); finished rows keep going, ignored
  }
  return out;
}

struct Hypothesis {
  std::vector<int64_t> tokens;
  double score;
};

// k beams for each of b prompts: rows [i·k, (i+1)·k) belong to prompt i.
struct BeamState {
  int64_t b, k;
  double length_penalty;
  std::vector<double> logprob;
  std::vector<std::vector<int64_t>> seqs;
  std::vector<std::vector<Hypothesis>> finished;
  std::vector<bool> done;
  std::vector<int64_t> source, next_token;  // the last step's: the beam each row continues, and its token

  BeamState(int64_t b_, int64_t k_, double penalty)
      : b(b_), k(k_), length_penalty(penalty), logprob(b_ * k_, 0.0), seqs(b_ * k_), finished(b_), done(b_, false) {
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 1; j < k; ++j) logprob[i * k + j] = -1e9;  // start from one live beam per prompt
    }
  }
  double score(double lp, size_t length) const {
    return lp / std::pow(static_cast<double>(std::max<size_t>(length, 1)), length_penalty);
  }

  // One step from the 2k best continuations of each prompt: EOS ends a hypothesis, the
  // first k others live on. A prompt is done once it has k hypotheses and no live beam
  // can beat the worst of them.
  void advance(const at::Tensor& top_scores, const at::Tensor& top_index, int64_t v, bool stop_at_eos, int64_t eos) {
    auto sc = top_scores.accessor<float, 2>();
    auto ix = top_index.accessor<int64_t, 2>();
    source.assign(b * k, 0), next_token.assign(b * k, 0);
    std::vector<double> next_logprob(b * k);
    std::vector<std::vector<int64_t>> next_seqs(b * k);
    for (int64_t i = 0; i < b; ++i) {
      int64_t kept = 0;
      for (int64_t c = 0; c < 2 * k && kept < k; ++c) {
        const int64_t beam = i * k + ix[i][c] / v, token = ix[i][c] % v;
        std::vector<int64_t> seq = seqs[beam];
        seq.push_back(token);
        if (!done[i] && stop_at_eos && token == eos) {
          finished[i].push_back({seq, score(sc[i][c], seq.size())});
          continue;
        }
        const int64_t slot = i * k + kept++;
        source[slot] = beam, next_token[slot] = token, next_logprob[slot] = sc[i][c];
        next_seqs[slot] = std::move(seq);
      }
      if (!done[i] && static_cast<int64_t>(finished[i].size()) >= k) {
        double worst = std::numeric_limits<double>::infinity();
        for (const auto& h : finished[i]) worst = std::min(worst, h.score);
        done[i] = score(next_logprob[i * k], next_seqs[i * k].size()) <= worst;
      }
    }
    seqs = std::move(next_seqs);
    logprob = std::move(next_logprob);
  }

  // Each prompt's best hypothesis; live beams count where the prompt is not done.
  std::vector<std::vector<int64_t>> best() {
    std::vector<std::vector<int64_t>> out(b);
    for (int64_t i = 0; i < b; ++i) {
      if (!done[i]) {
        for (int64_t j = 0; j < k; ++j) finished[i].push_back({seqs[i * k + j], score(logprob[i * k + j], seqs[i * k + j].size())});
      }
      auto top = std::max_element(finished[i].begin(), finished[i].end(),
                                  [](const Hypothesis& a, const Hypothesis& c) { return a.score < c.score; });
      out[i] = top->tokens;
    }
    return out;
  }
};

std::vector<std::vector<int64_t>> beam_search(models::Model& model, const at::Tensor& input_ids,
                                              const at::Tensor& attention_mask, const GenerationOptions& o) {
  const auto spec = model.generation_spec();
  const int64_t b = input_ids.size(0), k = o.num_beams;
  auto session = model.start_decoding(input_ids, attention_mask, o.use_cache);
  at::Tensor expand = at::arange(b, input_ids.options()).repeat_interleave(k);
  session->select(expand);
  at::Tensor tokens = first_tokens(spec, input_ids).index_select(0, expand);
  BeamState beams(b, k, o.length_penalty);
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    check_stop("generation");
    at::Tensor logprobs = session->step(tokens).to(at::kFloat).log_softmax(-1).cpu();  // (B·k, V)
    const int64_t v = logprobs.size(1);
    at::Tensor total = logprobs + at::tensor(beams.logprob, at::kDouble).to(at::kFloat).unsqueeze(1);
    auto [top_scores, top_index] = total.view({b, k * v}).topk(2 * k, -1);  // (B, 2k)
    beams.advance(top_scores, top_index, v, o.stop_at_eos, spec.eos_token_id);
    if (std::all_of(beams.done.begin(), beams.done.end(), [](bool d) { return d; })) break;
    session->select(at::tensor(beams.source, at::kLong).to(input_ids.device()));
    tokens = at::tensor(beams.next_token, at::kLong).to(input_ids.device()).unsqueeze(1);  // (B·k, 1)
  }
  return beams.best();
}

}  // namespace

std::vector<std::vector<int64_t>> generate(models::Model& model, const at::Tensor& input_ids,
                                           const at::Tensor& attention_mask, const GenerationOptions& options) {
  check_input(options.max_new_tokens >= 1, "generation: max_new_tokens must be >= 1");
  check_input(input_ids.dim() == 2 && input_ids.size(0) > 0, "generation: input_ids must be (batch, length)");
  const auto spec = model.generation_spec();
  models::check_token_ids(input_ids, spec.vocab_size > 0 ? spec.vocab_size : std::numeric_limits<int64_t>::max(),
                          "prompt");
  if (!spec.encoder_decoder) {
    check_input(input_ids.size(1) > 0, "generation: the prompt is empty");
    check_input(!attention_mask.defined() || attention_mask.ne(0).all().item<bool>(),
                "generation: decoder-only prompts must be unpadded; generate them one at a time");
  }
  check_input(spec.max_positions > 0 || options.max_new_tokens <= kMaxNewTokensWithoutPositions,
              "generation: --max-new-tokens " + std::to_string(options.max_new_tokens) + " exceeds " +
                  std::to_string(kMaxNewTokensWithoutPositions) + ", the limit for a model without a position limit");
  if (spec.max_positions > 0) {
    // Said before the first token, not after the last one that fits (the decoder is fed
    // the prompt, or the start token, and every new token but the last).
    const int64_t first = spec.encoder_decoder ? 1 : input_ids.size(1);
    const int64_t most = spec.max_positions - first + 1;
    check_input(options.max_new_tokens <= most,
                "generation: --max-new-tokens " + std::to_string(options.max_new_tokens) + " does not fit the model's " +
                    std::to_string(spec.max_positions) + " positions" +
                    (spec.encoder_decoder ? "" : " after a prompt of " + std::to_string(first) + " tokens") +
                    " (at most " + std::to_string(std::max<int64_t>(most, 0)) + ")");
  }
  c10::InferenceMode inference;  // no autograd, no version counters: less work per op while decoding
  nn::EvalMode eval_mode(model);
  return options.search == Search::kBeam ? (check_input(options.num_beams >= 1, "generation: beams must be >= 1"),
                                            beam_search(model, input_ids, attention_mask, options))
                                         : greedy_or_sample(model, input_ids, attention_mask, options);
}

std::vector<std::string> translate(models::Model& model, const tokenizer::Tokenizer& tok,
                                   const std::vector<std::string>& sources, const GenerationOptions& options,
                                   c10::Device device) {
  const int32_t eos = tok.specials().eos;
  std::vector<std::string> out;
  for (const auto& s : sources) {
    auto ids = tok.encode(s);
    ids.push_back(eos);
    at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0).to(device);
    auto tokens = generate(model, input, {}, options)[0];
    if (!tokens.empty() && tokens.back() == eos) tokens.pop_back();
    out.push_back(tok.decode(std::vector<int32_t>(tokens.begin(), tokens.end())));
  }
  return out;
}

namespace {

// Rows of `prompts` (indexes into it) that generate together: consecutive runs of
// batch_size for an encoder, equal lengths for a decoder-only prompt.
std::vector<std::vector<size_t>> generation_batches(const std::vector<std::vector<int32_t>>& prompts, bool padded,
                                                    int64_t batch_size) {
  std::vector<size_t> order(prompts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (!padded) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prompts[a].size() < prompts[b].size(); });
  }
  std::vector<std::vector<size_t>> batches;
  for (const size_t i : order) {
    const bool fits = !batches.empty() && static_cast<int64_t>(batches.back().size()) < batch_size &&
                      (padded || prompts[batches.back().front()].size() == prompts[i].size());
    if (!fits) batches.emplace_back();
    batches.back().push_back(i);
  }
  return batches;
}

}  // namespace

std::vector<std::string> generate_texts(models::Model& model, const tokenizer::Tokenizer& tok,
                                        const std::vector<std::vector<int32_t>>& prompts, const GenerationOptions& options,
                                        int64_t batch_size, int32_t pad_id, c10::Device device) {
  check_input(batch_size >= 1, "generation: the batch size must be >= 1");
  const auto spec = model.generation_spec();
  std::vector<std::string> out(prompts.size());
  ProgressBar bar(static_cast<int64_t>(prompts.size()), "generate");
  bar.transient = true;
  int64_t done = 0;
  for (const auto& rows : generation_batches(prompts, spec.encoder_decoder, batch_size)) {
    size_t width = 0;
    for (const size_t i : rows) width = std::max(width, prompts[i].size());
    std::vector<int64_t> ids(rows.size() * width, pad_id), mask(rows.size() * width, 0);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& p = prompts[rows[r]];
      std::copy(p.begin(), p.end(), ids.begin() + static_cast<std::ptrdiff_t>(r * width));
      std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(r * width), p.size(), 1);
    }
    const auto shape = std::vector<int64_t>{static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)};
    const at::Tensor input = at::tensor(ids, at::kLong).view(shape).to(device);
    const at::Tensor attention = at::tensor(mask, at::kLong).view(shape).to(device);
    auto generated = generate(model, input, spec.encoder_decoder ? attention : at::Tensor(), options);
    for (size_t r = 0; r < rows.size(); ++r) {
      auto& tokens = generated[r];
      const auto eos = std::find(tokens.begin(), tokens.end(), spec.eos_token_id);
      out[rows[r]] = tok.decode(std::vector<int32_t>(tokens.begin(), eos));
    }
    bar.update(done += static_cast<int64_t>(rows.size()));
  }
  bar.finish();
  return out;
}

}  // namespace lmkit::eval
