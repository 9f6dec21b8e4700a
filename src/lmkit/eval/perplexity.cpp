#include "lmkit/eval/perplexity.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/core/progress.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/objectives.h"
#include "lmkit/data/text.h"
#include "lmkit/eval/loss.h"
#include "lmkit/models/family.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

TextStats text_stats(const std::string& path, const std::string& text_field) {
  TextStats s;
  for (const auto& file : data::text_files(path)) {  // a directory's or a pattern's shards, in the corpus's order
    // the text's, not a compressed file's or the JSON around JSONL's texts
    s.bytes += data::text_bytes(file, data::TextFormat::kAuto, text_field);
    data::for_each_document(file, data::TextFormat::kAuto, text_field, [&](data::Document&& doc) {
      for (const auto& sentence : doc.sentences) {
        std::istringstream in(sentence);
        std::string w;
        while (in >> w) ++s.words;
      }
      ++s.words;  // the document's end
    });
  }
  return s;
}

namespace {

// A sliding window: [begin, end) scoring its last `scored` tokens (end − the previous end).
struct Window {
  int64_t begin, end, scored;
};

// The windows over stream positions [offset, offset + n), appended to `windows`.
void sliding_windows(int64_t offset, int64_t n, int64_t context, int64_t stride, std::vector<Window>& windows) {
  for (int64_t begin = 0, prev_end = 0; prev_end < n; begin += stride) {
    const int64_t end = std::min(begin + context, n);
    windows.push_back({offset + begin, offset + end, end - prev_end});
    prev_end = end;
  }
}

// The windows of the whole stream, or of each document alone (its tokens and separator; one
// token is too short to score), longest first so that windows of a length share batches.
std::vector<Window> stream_windows(const data::Corpus& corpus, int64_t n, const SlidingWindow& w, int64_t stride) {
  std::vector<Window> windows;
  if (!w.per_document) {
    sliding_windows(0, n, w.context, stride, windows);
    return windows;
  }
  for (int64_t d = 0; d < corpus.num_documents(); ++d) {
    const int64_t length = corpus.document_end_token(d) - corpus.document_begin_token(d) + 1;
    if (length >= 2) sliding_windows(corpus.document_begin_token(d) + d, length, w.context, stride, windows);
  }
  std::stable_sort(windows.begin(), windows.end(),
                   [](const Window& a, const Window& b) { return a.end - a.begin > b.end - b.begin; });
  return windows;
}

// From window i on, a batch of up to `rows` equally long windows (only the last window
// can be shorter); i moves past them. Unscored positions are labelled -100.
Batch window_batch(const data::PackedStream& stream, const std::vector<Window>& windows, size_t& i, int64_t max_rows) {
  const int64_t len = windows[i].end - windows[i].begin;
  std::vector<int64_t> ids, labels;
  int64_t rows = 0;
  for (; i < windows.size() && rows < max_rows && windows[i].end - windows[i].begin == len; ++i, ++rows) {
    std::vector<int32_t> tokens;
    stream.read(windows[i].begin, windows[i].end, tokens);
    for (int64_t t = 0; t < len; ++t) {
      ids.push_back(tokens[static_cast<size_t>(t)]);
      labels.push_back(t >= len - windows[i].scored ? tokens[static_cast<size_t>(t)] : -100);
    }
  }
  Batch b;
  b.input_ids = at::tensor(ids, at::kLong).view({rows, len});
  b.labels = at::tensor(labels, at::kLong).view({rows, len});
  return b;
}

}  // namespace

Json causal_perplexity(models::Model& model, const data::Corpus& corpus, int32_t separator, const SlidingWindow& w,
                       c10::Device device, const TextStats* stats) {
  check_input(w.context >= 2, "--context must be at least 2");
  const int64_t stride = w.stride > 0 ? w.stride : w.context;
  check_input(stride <= w.context, "--stride must not exceed --context");
  data::PackedStream stream(std::shared_ptr<const data::Corpus>(&corpus, [](const data::Corpus*) {}), separator);
  const int64_t n = stream.size();
  const std::vector<Window> windows = stream_windows(corpus, n, w, stride);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  double nll = 0;
  int64_t scored = 0;
  ProgressBar bar(static_cast<int64_t>(windows.size()), "perplexity");
  for (size_t i = 0; i < windows.size();) {
    check_stop("perplexity");
    const Batch b = window_batch(stream, windows, i, w.batch_size).to(device);
    const int64_t targets = models::count_targets(model, b);
    if (targets > 0) {
      nll += model.forward(b).loss.item<double>() * static_cast<double>(targets);
      scored += targets;
    }
    bar.update(static_cast<int64_t>(i));
  }
  bar.finish();
  const double loss = nll / static_cast<double>(std::max<int64_t>(scored, 1));
  Json r = {{"loss", loss},
            {"perplexity", std::exp(loss)},
            {"tokens", scored},
            {"stream_tokens", n},
            {"context", w.context},
            {"stride", stride}};
  if (w.per_document) r["documents"] = corpus.num_documents();
  if (stats && stats->words > 0) {
    // Extrapolate the mean NLL to every token of the stream, then normalise per word / byte.
    const double total = loss * static_cast<double>(n);
    r["words"] = stats->words;
    r["bytes"] = stats->bytes;
    r["word_perplexity"] = std::exp(total / static_cast<double>(stats->words));
    r["bits_per_byte"] = total / (std::log(2.0) * static_cast<double>(stats->bytes));
  }
  return r;
}

Json masked_lm_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus,
                          const tokenizer::Tokenizer& tok, int64_t seq_len, int64_t batch_size, c10::Device device) {
  auto ds = std::make_shared<data::MaskedLmDataset>(corpus, tok, seq_len, data::MaskingOptions{}, 0);
  data::LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.pad_id = tok.specials().pad;
  lo.prefetch = 1;
  Json r = evaluate_loss(model, ds, lo, device);
  // The first loss term's (the masked LM's; a pre-training head's other terms are left out).
  const double perplexity = r["perplexity"].get<double>();
  return {{"loss", std::log(perplexity)}, {"perplexity", perplexity}, {"tokens", r["targets"]}};
}

Json pseudo_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus, const tokenizer::Tokenizer& tok,
                       int64_t seq_len, int64_t max_sequences, c10::Device device) {
  data::MaskingOptions none;
  none.probability = 0;  // the plain [CLS] block [SEP] sequences; masking is done here
  data::MaskedLmDataset ds(corpus, tok, seq_len, none, 0);
  const int64_t n = max_sequences > 0 ? std::min(max_sequences, ds.size(0)) : ds.size(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  double nll = 0;
  int64_t scored = 0;
  ProgressBar bar(n, "pseudo-perplexity");
  for (int64_t s = 0; s < n; ++s) {
    // The original sequence (the dataset always chooses at least one position).
    const data::Example e = ds.get(s, 0);
    std::vector<int32_t> ids = e.input_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (e.labels[i] >= 0) ids[i] = e.labels[i];
    }
    // One row per maskable position, that position masked.
    std::vector<int64_t> rows, labels;
    int64_t count = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (tok.is_special(ids[i])) continue;
      for (size_t j = 0; j < ids.size(); ++j) {
        rows.push_back(j == i ? tok.specials().mask : ids[j]);
        labels.push_back(j == i ? ids[j] : -100);
      }
      ++count;
    }
    if (count == 0) continue;
    const int64_t t = static_cast<int64_t>(ids.size());
    for (int64_t start = 0; start < count; start += 32) {
      check_stop("pseudo-perplexity");
      const int64_t m = std::min<int64_t>(32, count - start);
      Batch b;
      b.input_ids = at::tensor(std::vector<int64_t>(rows.begin() + start * t, rows.begin() + (start + m) * t), at::kLong)
                        .view({m, t})
                        .to(device);
      b.labels = at::tensor(std::vector<int64_t>(labels.begin() + start * t, labels.begin() + (start + m) * t), at::kLong)
                     .view({m, t})
                     .to(device);
      Output out = model.forward(b);
      at::Tensor loss = out.terms.empty() ? out.loss : out.terms.front().mean;  // the masked LM's term
      nll += loss.item<double>() * static_cast<double>(m);
      scored += m;
    }
    bar.update(s + 1);
  }
  bar.finish();
  const double loss = nll / static_cast<double>(std::max<int64_t>(scored, 1));
  return {{"loss", loss}, {"perplexity", std::exp(loss)}, {"tokens", scored}, {"sequences", n}};
}

Json span_perplexity(models::Model& model, std::shared_ptr<const data::Corpus> corpus, const tokenizer::Tokenizer& tok,
                     int64_t input_length, int64_t batch_size, c10::Device device) {
  auto ds = std::make_shared<data::SpanCorruptionDataset>(corpus, tok, input_length, 0);
  data::LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.pad_id = tok.specials().pad;
  lo.prefetch = 1;
  Json r = evaluate_loss(model, ds, lo, device);
  return {{"loss", r["loss"]}, {"perplexity", r["perplexity"]}, {"tokens", r["targets"]}};
}

}  // namespace lmkit::eval
