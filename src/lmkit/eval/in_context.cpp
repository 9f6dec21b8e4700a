#include "lmkit/eval/in_context.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/text_input.h"
#include "lmkit/nn/eval_mode.h"
#include "lmkit/tokenizer/unicode.h"

namespace lmkit::eval {

// ---- Python's random.Random (CPython's _randommodule.c and random.py) ----

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;  // the seed's 32-bit words, least significant first
  do {
    key.push_back(static_cast<uint32_t>(seed & 0xffffffffu));
    seed >>= 32;
  } while (seed != 0);
  mt_[0] = 19650218u;  // init_genrand(19650218), then init_by_array(key)
  for (uint32_t i = 1; i < 624; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + i;
  uint32_t i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(624, key.size()); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    if (++i >= 624) mt_[0] = mt_[623], i = 1;
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = 623; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - i;
    if (++i >= 624) mt_[0] = mt_[623], i = 1;
  }
  mt_[0] = 0x80000000u;
}

uint32_t PythonRandom::next() {
  constexpr int n = 624, m = 397;
  auto twist = [](uint32_t upper, uint32_t lower, uint32_t far) {
    const uint32_t y = (upper & 0x80000000u) | (lower & 0x7fffffffu);
    return far ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  };
  if (index_ >= n) {
    for (int k = 0; k < n; ++k) mt_[k] = twist(mt_[k], mt_[(k + 1) % n], mt_[(k + m) % n]);
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

uint32_t PythonRandom::getrandbits(int k) { return next() >> (32 - k); }

uint64_t PythonRandom::randbelow(uint64_t n) {
  check_input(n >= 1 && n <= 0xffffffffu, "randbelow: n must be in [1, 2^32)");
  int k = 0;
  while (k < 64 && (n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<size_t> PythonRandom::sample(size_t n, size_t k) {
  check_input(k <= n, "sample larger than population");
  std::vector<size_t> result(k);
  size_t setsize = 21;
  if (k > 5) setsize += static_cast<size_t>(std::pow(4.0, std::ceil(std::log(static_cast<double>(k) * 3) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<size_t> pool(n);
    std::iota(pool.begin(), pool.end(), size_t{0});
    for (size_t i = 0; i < k; ++i) {
      const auto j = static_cast<size_t>(randbelow(n - i));
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
    return result;
  }
  std::vector<bool> selected(n, false);
  for (size_t i = 0; i < k; ++i) {
    auto j = static_cast<size_t>(randbelow(n));
    while (selected[j]) j = static_cast<size_t>(randbelow(n));
    selected[j] = true;
    result[i] = j;
  }
  return result;
}

// ---- task files ----

namespace {

std::string string_field(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw InputError(where + ": missing field '" + key + "'");
  if (!j[key].is_string()) throw InputError(where + ": field '" + key + "' must be a string, got " + brief_json(j[key]));
  return j[key].get<std::string>();
}

std::vector<std::string> string_list(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw InputError(where + ": missing field '" + key + "'");
  const Json& v = j[key];
  if (!v.is_array() || v.empty()) throw InputError(where + ": field '" + key + "' must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& x : v) {
    if (!x.is_string()) throw InputError(where + ": field '" + key + "' holds " + brief_json(x) + ", not a string");
    out.push_back(x.get<std::string>());
  }
  return out;
}

int64_t gold_field(const Json& j, size_t options, const std::string& where) {
  if (!j.contains("gold")) throw InputError(where + ": missing field 'gold'");
  if (!j["gold"].is_number_integer()) throw InputError(where + ": 'gold' must be an integer, got " + brief_json(j["gold"]));
  // A gold past int64 (2^63) must not wrap to a negative index in the message.
  if (j["gold"].is_number_unsigned() && j["gold"].get<uint64_t>() >= options) {
    throw InputError(where + ": gold " + std::to_string(j["gold"].get<uint64_t>()) + " is outside the " + std::to_string(options) +
                     " options");
  }
  const auto gold = j["gold"].get<int64_t>();
  if (gold < 0 || gold >= static_cast<int64_t>(options)) {
    throw InputError(where + ": gold " + std::to_string(gold) + " is outside the " + std::to_string(options) + " options");
  }
  return gold;
}

IclFormat format_of(const Json& j, const std::string& where) {
  if (j.is_object() && j.contains("query")) return IclFormat::kMultipleChoice;
  if (j.is_object() && j.contains("context_options")) return IclFormat::kSchema;
  if (j.is_object() && (j.contains("context") || j.contains("text"))) return IclFormat::kCompletion;
  throw InputError(where + ": not an in-context example (expected {query, choices, gold}, {context_options, "
                   "continuation, gold}, {context, continuation} or {text})");
}

IclExample parse_example(const Json& j, IclFormat format, const std::string& where) {
  IclExample e;
  if (format == IclFormat::kMultipleChoice) {
    e.contexts = {string_field(j, "query", where)};
    e.continuations = string_list(j, "choices", where);
    // One choice scores accuracy 1.0 whatever the model: no test at all.
    check_input(e.continuations.size() >= 2, where + ": 'choices' needs at least two options");
    e.gold = gold_field(j, e.continuations.size(), where);
  } else if (format == IclFormat::kSchema) {
    e.contexts = string_list(j, "context_options", where);
    e.continuations = {string_field(j, "continuation", where)};
    check_input(e.contexts.size() >= 2, where + ": 'context_options' needs at least two options");
    e.gold = gold_field(j, e.contexts.size(), where);
  } else if (j.contains("text")) {
    // LAMBADA: the last space-separated word is the continuation (lm-evaluation-harness' rsplit(" ", 1)).
    const std::string text = string_field(j, "text", where);
    const size_t space = text.rfind(' ');
    if (space == std::string::npos) throw InputError(where + ": 'text' has no space before a last word");
    e.contexts = {text.substr(0, space)};
    e.continuations = {text.substr(space + 1)};
  } else {
    e.contexts = {string_field(j, "context", where)};
    e.continuations = {string_field(j, "continuation", where)};
  }
  e.source = j;
  return e;
}

// What a demonstration shows: the gold context, the delimiter and the gold continuation.
std::string demonstration(const IclTask& task, const IclExample& e, const IclOptions& o) {
  switch (task.format) {
    case IclFormat::kMultipleChoice: return e.contexts[0] + o.delimiter + e.continuations[static_cast<size_t>(e.gold)];
    case IclFormat::kSchema: return e.contexts[static_cast<size_t>(e.gold)] + o.delimiter + e.continuations[0];
    case IclFormat::kCompletion: break;
  }
  return e.contexts[0] + o.delimiter + e.continuations[0];
}

// The few-shot prefix of example `index`, drawn as lm-evaluation-harness' ContextSampler
// draws from the split it evaluates: shots + 1 documents, those equal to the example
// removed, the first `shots` kept (all equal ones removed and `shots` redrawn when too few remain).
std::string few_shot_prefix(const IclTask& task, size_t index, const IclOptions& o, PythonRandom& rnd) {
  if (o.shots == 0) return "";
  const auto shots = static_cast<size_t>(o.shots);
  const Json& self = task.examples[index].source;
  std::vector<size_t> picked;
  for (const size_t i : rnd.sample(task.examples.size(), shots + 1)) {
    if (task.examples[i].source != self && picked.size() < shots) picked.push_back(i);
  }
  if (picked.size() < shots) {
    std::vector<size_t> pool;
    for (size_t i = 0; i < task.examples.size(); ++i) {
      if (task.examples[i].source != self) pool.push_back(i);
    }
    check_input(pool.size() >= shots, task.path + ": too few other examples for " + std::to_string(shots) + " shots");
    picked.clear();
    for (const size_t k : rnd.sample(pool.size(), shots)) picked.push_back(pool[k]);
  }
  std::string prefix;
  for (const size_t i : picked) prefix += demonstration(task, task.examples[i], o) + o.example_delimiter;
  return prefix;
}

// Python's str.isspace() on one code point.
bool python_space(char32_t c) { return tokenizer::unicode::is_whitespace(c) || (c >= 0x1c && c <= 0x1f); }

// One scored pair: the context's tokens and the continuation's (lm-evaluation-harness' _encode_pair).
struct Request {
  size_t example = 0, pair = 0;
  std::vector<int32_t> context, continuation;
};

Request encode_pair(const tokenizer::Tokenizer& tok, std::string context, std::string continuation, int32_t prefix_id) {
  Request r;
  if (context.empty()) {
    r.context = {prefix_id};
    r.continuation = tok.encode(continuation);
    return r;
  }
  // Trailing whitespace of the context moves to the continuation.
  const std::u32string cps = tokenizer::unicode::decode_utf8(context);
  size_t keep = cps.size();
  while (keep > 0 && python_space(cps[keep - 1])) --keep;
  if (keep < cps.size()) {
    const std::string tail = tokenizer::unicode::encode_utf8(cps.substr(keep));
    continuation = tail + continuation;
    context.resize(context.size() - tail.size());
  }
  const auto whole = tok.encode(context + continuation);
  r.context = tok.encode(context);
  const size_t n = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(n), whole.end());
  return r;
}

}  // namespace

IclTask read_icl_task(const std::string& path) {
  IclTask task;
  task.path = path;
  task.name = std::filesystem::path(data::strip_compression_suffix(path)).stem().string();  // lambada.jsonl.gz: lambada
  const auto lines = data::read_text_lines(path);  // gzip or zstd decompressed, as a task file is
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(i + 1);
    const Json j = parse_json(lines[i], where, /*with_line=*/false);
    const IclFormat f = format_of(j, where);
    if (task.examples.empty()) task.format = f;
    if (f != task.format) throw InputError(where + ": an example of another format than the file's first");
    task.examples.push_back(parse_example(j, f, where));
    task.examples.back().line = static_cast<int64_t>(i + 1);
  }
  check_input(!task.examples.empty(), path + ": no examples");
  return task;
}

}  // namespace lmkit::eval

namespace lmkit::eval {

namespace {

struct Scored {
  double loglikelihood = 0;
  bool greedy = true, truncated = false;
};

// Scores continuation `cont` from the logits predicting its tokens (n, V), the first row from the context's end.
void score_continuation(const at::Tensor& logits, const std::vector<int32_t>& cont, c10::Device device, Scored& out) {
  const at::Tensor lp = logits.to(at::kFloat).log_softmax(-1);
  const at::Tensor target = at::tensor(std::vector<int64_t>(cont.begin(), cont.end()), at::kLong).to(device);
  out.loglikelihood = lp.gather(1, target.unsqueeze(1)).sum().item<double>();
  out.greedy = lp.argmax(-1).eq(target).all().item<bool>();
}

// The model's input for a request: context then continuation, the last token predicted
// rather than read, left-truncated to the model's positions (lm-evaluation-harness' rule).
std::vector<int64_t> model_input(const Request& r, int64_t max_positions, bool* truncated) {
  std::vector<int64_t> all(r.context.begin(), r.context.end());
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  *truncated = max_positions > 0 && static_cast<int64_t>(all.size()) > max_positions + 1;
  if (*truncated) all.erase(all.begin(), all.end() - (max_positions + 1));
  all.pop_back();
  return all;
}

void score_batch(models::Model& model, const std::vector<Request>& requests, const std::vector<size_t>& rows,
                 int64_t max_positions, int32_t pad, c10::Device device, std::vector<Scored>& out) {
  std::vector<std::vector<int64_t>> inputs;
  size_t width = 1;
  for (const size_t r : rows) {
    inputs.push_back(model_input(requests[r], max_positions, &out[r].truncated));
    width = std::max(width, inputs.back().size());
  }
  std::vector<int64_t> ids(rows.size() * width, pad), mask(rows.size() * width, 0);
  for (size_t k = 0; k < rows.size(); ++k) {
    std::copy(inputs[k].begin(), inputs[k].end(), ids.begin() + static_cast<std::ptrdiff_t>(k * width));
    std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(k * width), inputs[k].size(), 1);
  }
  const std::vector<int64_t> shape{static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)};
  Batch b;
  b.input_ids = at::tensor(ids, at::kLong).view(shape).to(device);
  b.attention_mask = at::tensor(mask, at::kLong).view(shape).to(device);
  const at::Tensor logits = model.forward(b).logits;  // (B, W, V)
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& cont = requests[rows[k]].continuation;
    const auto length = static_cast<int64_t>(inputs[k].size());
    // A continuation longer than the model's window is scored on its last tokens that fit.
    const int64_t n = std::min(static_cast<int64_t>(cont.size()), length);
    if (n == 0) continue;
    score_continuation(logits[static_cast<int64_t>(k)].slice(0, length - n, length),
                       std::vector<int32_t>(cont.end() - n, cont.end()), device, out[rows[k]]);
  }
}

// Whether requests [first, first + count) of one example share their context, and it pays: two or
// more, the same context tokens, each continuation non-empty, none truncated, and the context tokens
// saved ((count - 1) x context) at least the tokens the choices still read — one example at a time
// forgoes the batching of examples, so two long choices after a short question (PIQA at 0 shots)
// are faster batched.
bool shares_context(const std::vector<Request>& requests, size_t first, size_t count, int64_t max_positions) {
  if (count < 2) return false;
  size_t read = 0;
  for (size_t r = first; r < first + count; ++r) {
    const Request& q = requests[r];
    if (q.context != requests[first].context || q.continuation.empty()) return false;
    if (max_positions > 0 && static_cast<int64_t>(q.context.size() + q.continuation.size()) > max_positions + 1) {
      return false;
    }
    read += q.continuation.size();
  }
  return (count - 1) * requests[first].context.size() >= read;
}

// One example's choices against one pass over their shared context: the context fills the KV
// cache once and predicts every choice's first token; the cache is copied to one row per choice,
// which reads the rest of its tokens (right-padded: a causal model's padding changes nothing before it).
void score_shared(models::Model& model, const std::vector<Request>& requests, size_t first, size_t count, int32_t pad,
                  c10::Device device, std::vector<Scored>& out) {
  const auto& context = requests[first].context;
  auto session = model.start_decoding({}, {}, /*use_cache=*/true);
  const at::Tensor ctx = at::tensor(std::vector<int64_t>(context.begin(), context.end()), at::kLong).view({1, -1});
  const at::Tensor head = session->step(ctx.to(device));  // (1, V)
  size_t width = 0;
  for (size_t r = first; r < first + count; ++r) width = std::max(width, requests[r].continuation.size() - 1);
  at::Tensor rest;  // (count, width, V)
  if (width > 0) {
    std::vector<int64_t> ids(count * width, pad);
    for (size_t k = 0; k < count; ++k) {
      const auto& cont = requests[first + k].continuation;
      std::copy(cont.begin(), cont.end() - 1, ids.begin() + static_cast<std::ptrdiff_t>(k * width));
    }
    session->select(at::zeros({static_cast<int64_t>(count)}, at::kLong).to(device));
    const std::vector<int64_t> shape{static_cast<int64_t>(count), static_cast<int64_t>(width)};
    rest = session->step_all(at::tensor(ids, at::kLong).view(shape).to(device));
  }
  for (size_t k = 0; k < count; ++k) {
    const auto& cont = requests[first + k].continuation;
    at::Tensor logits = head;
    if (cont.size() > 1) logits = at::cat({head, rest[static_cast<int64_t>(k)].slice(0, 0, cont.size() - 1)}, 0);
    score_continuation(logits, cont, device, out[first + k]);
  }
}

// Every (context, continuation) pair of every example, its few-shot prefix first.
std::vector<Request> build_requests(const tokenizer::Tokenizer& tok, const IclTask& task, const IclOptions& o,
                                    int32_t prefix_id) {
  PythonRandom rnd(o.seed);
  std::vector<Request> requests;
  for (size_t i = 0; i < task.examples.size(); ++i) {
    const std::string prefix = few_shot_prefix(task, i, o, rnd);
    const IclExample& e = task.examples[i];
    const size_t pairs = std::max(e.contexts.size(), e.continuations.size());
    for (size_t p = 0; p < pairs; ++p) {
      const std::string& context = e.contexts[e.contexts.size() > 1 ? p : 0];
      const std::string& continuation = e.continuations[e.continuations.size() > 1 ? p : 0];
      Request r = encode_pair(tok, prefix + context, o.delimiter + continuation, prefix_id);
      r.example = i;
      r.pair = p;
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

// The first index of the largest value (numpy's argmax).
int64_t argmax(const std::vector<double>& v) {
  return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<IclScore> collect(const IclTask& task, const std::vector<Request>& requests, const std::vector<Scored>& scored) {
  std::vector<IclScore> scores(task.examples.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    IclScore& s = scores[requests[r].example];
    s.loglikelihoods.push_back(scored[r].loglikelihood);
    s.tokens.push_back(static_cast<int64_t>(requests[r].continuation.size()));
    s.greedy.push_back(scored[r].greedy);
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    IclScore& s = scores[i];
    s.prediction = s.prediction_norm = argmax(s.loglikelihoods);
    if (task.format != IclFormat::kMultipleChoice) continue;
    // acc_norm: the log-likelihood over the choice's length in characters, delimiter excluded.
    std::vector<double> norm;
    for (size_t c = 0; c < s.loglikelihoods.size(); ++c) {
      const auto chars = tokenizer::unicode::decode_utf8(task.examples[i].continuations[c]).size();
      norm.push_back(s.loglikelihoods[c] / static_cast<double>(chars));
    }
    s.prediction_norm = argmax(norm);
  }
  return scores;
}

Json summarize(const IclTask& task, const std::vector<IclScore>& scores, const IclOptions& o) {
  double right = 0, right_norm = 0, ll = 0, tokens = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const IclScore& s = scores[i];
    const bool completion = task.format == IclFormat::kCompletion;
    right += completion ? (s.greedy[0] ? 1 : 0) : (s.prediction == task.examples[i].gold ? 1 : 0);
    right_norm += s.prediction_norm == task.examples[i].gold ? 1 : 0;
    ll += s.loglikelihoods[0], tokens += static_cast<double>(s.tokens[0]);
  }
  const auto n = static_cast<double>(scores.size());
  Json r = {{"task", task.name}, {"accuracy", right / n}, {"examples", scores.size()}, {"shots", o.shots}};
  if (task.format == IclFormat::kMultipleChoice) r["accuracy_norm"] = right_norm / n;
  if (task.format == IclFormat::kCompletion) {
    r["perplexity"] = std::exp(-ll / n);
    r["token_perplexity"] = tokens > 0 ? std::exp(-ll / tokens) : 1.0;
  }
  r["format"] = task.format == IclFormat::kMultipleChoice ? "multiple-choice"
                : task.format == IclFormat::kSchema      ? "schema"
                                                          : "completion";
  return r;
}

}  // namespace

Json evaluate_in_context(models::Model& model, const tokenizer::Tokenizer& tok, const IclTask& task, const IclOptions& o,
                         c10::Device device, std::vector<IclScore>* scores_out) {
  check_input(o.shots >= 0 && o.batch_size >= 1, "in-context: --shots must be >= 0 and --batch-size >= 1");
  check_input(o.shots < static_cast<int64_t>(task.examples.size()),
              task.path + ": " + std::to_string(o.shots) + " shots need more than " +
                  std::to_string(task.examples.size()) + " examples");
  const int32_t eos = tok.specials().eos;
  check_input(eos >= 0, "in-context: the tokenizer has no end-of-text token (the prefix of an empty context)");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Request> requests = build_requests(tok, task, o, eos);
  const int64_t max_positions = model.generation_spec().max_positions;
  // The examples whose choices share a context go through the KV cache one by one; every other
  // request is batched, longest first, so that a batch holds similar lengths (and the first one
  // shows a memory problem at once).
  std::vector<std::pair<size_t, size_t>> shared;  // (first request, count)
  std::vector<size_t> order;
  for (size_t first = 0, count = 0; first < requests.size(); first += count) {
    for (count = 1; first + count < requests.size() && requests[first + count].example == requests[first].example;) ++count;
    if (o.share_context && shares_context(requests, first, count, max_positions)) {
      shared.emplace_back(first, count);
    } else {
      for (size_t r = first; r < first + count; ++r) order.push_back(r);
    }
  }
  auto length = [&](size_t r) { return requests[r].context.size() + requests[r].continuation.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) > length(b); });
  std::vector<Scored> scored(requests.size());
  {
    c10::InferenceMode inference;
    nn::EvalMode eval_mode(model);
    for (const auto& [first, count] : shared) {
      check_stop("in-context scoring");
      score_shared(model, requests, first, count, eos, device, scored);
    }
    for (size_t first = 0; first < order.size(); first += static_cast<size_t>(o.batch_size)) {
      check_stop("in-context scoring");
      const size_t last = std::min(order.size(), first + static_cast<size_t>(o.batch_size));
      score_batch(model, requests, std::vector<size_t>(order.begin() + first, order.begin() + last), max_positions, eos,
                  device, scored);
    }
  }
  const auto scores = collect(task, requests, scored);
  Json r = summarize(task, scores, o);
  std::set<size_t> truncated;
  for (size_t q = 0; q < requests.size(); ++q) {
    if (scored[q].truncated) truncated.insert(requests[q].example);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r["truncated"] = truncated.size();
  r["shared_contexts"] = shared.size();
  r["requests"] = requests.size();
  r["seconds"] = seconds;
  r["examples_per_second"] = seconds > 0 ? static_cast<double>(scores.size()) / seconds : 0.0;
  if (scores_out) *scores_out = scores;
  return r;
}

std::string icl_predictions_jsonl(const IclTask& task, const std::vector<IclScore>& scores) {
  std::string out;
  for (size_t i = 0; i < scores.size(); ++i) {
    const IclScore& s = scores[i];
    Json j = {{"task", task.name},  {"index", i},  {"line", task.examples[i].line}, {"loglikelihoods", s.loglikelihoods},
              {"tokens", s.tokens}, {"greedy", s.greedy},            {"prediction", s.prediction}};
    if (task.format == IclFormat::kMultipleChoice) j["prediction_norm"] = s.prediction_norm;
    if (task.format != IclFormat::kCompletion) j["gold"] = task.examples[i].gold;
    out += j.dump() + "\n";
  }
  return out;
}

std::vector<std::string> icl_task_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& d : paths) {
    check_input(fs::exists(d), d + ": no such file or directory");
    if (!fs::is_directory(d)) {
      files.push_back(d);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() == ".jsonl") found.push_back(e.path().string());
    }
    check_input(!found.empty(), d + ": no .jsonl task files");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string icl_table(const Json& results) {
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %-16s %5s %9s %9s %10s %8s %9s %6s\n", "task", "format", "shots", "accuracy",
                "acc_norm", "perplexity", "examples", "truncated", "ex/s");
  std::string out = line;
  for (const auto& t : results) {
    auto figure = [&](const char* key) { return t.contains(key) ? std::to_string(t[key].get<double>()).substr(0, 6) : "-"; };
    std::snprintf(line, sizeof line, "%-20s %-16s %5lld %9s %9s %10s %8lld %9lld %6.1f\n", t["task"].get<std::string>().c_str(),
                  t["format"].get<std::string>().c_str(), static_cast<long long>(t["shots"].get<int64_t>()),
                  figure("accuracy").c_str(), figure("accuracy_norm").c_str(), figure("perplexity").c_str(),
                  static_cast<long long>(t["examples"].get<int64_t>()), static_cast<long long>(t["truncated"].get<int64_t>()),
                  t["examples_per_second"].get<double>());
    out += line;
  }
  return out;
}

}  // namespace lmkit::eval
