#include "lmkit/eval/token_classification.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "lmkit/core/error.h"
#include "lmkit/core/stop.h"
#include "lmkit/data/loader.h"
#include "lmkit/nn/eval_mode.h"

namespace lmkit::eval {

bool Entity::operator<(const Entity& o) const { return std::tie(type, begin, end) < std::tie(o.type, o.begin, o.end); }

namespace {

// seqeval's end_of_chunk and start_of_chunk, rule for rule.
bool end_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (prev_tag == 'E' || prev_tag == 'S') return true;
  if ((prev_tag == 'B' || prev_tag == 'I') && (tag == 'B' || tag == 'S' || tag == 'O')) return true;
  return prev_tag != 'O' && prev_tag != '.' && prev_type != type;
}

bool start_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (tag == 'B' || tag == 'S') return true;
  if ((prev_tag == 'E' || prev_tag == 'S' || prev_tag == 'O') && (tag == 'E' || tag == 'I')) return true;
  return tag != 'O' && tag != '.' && prev_type != type;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
double f1(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

}  // namespace

std::vector<Entity> get_entities(const std::vector<std::vector<std::string>>& sentences) {
  // Sentences joined with an O after each, then one more O to close the last chunk.
  std::vector<std::string> seq;
  for (const auto& s : sentences) {
    seq.insert(seq.end(), s.begin(), s.end());
    seq.push_back("O");
  }
  seq.push_back("O");
  std::vector<Entity> chunks;
  char prev_tag = 'O';
  std::string prev_type;
  int64_t begin = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    const std::string& chunk = seq[i];
    const char tag = chunk.empty() ? 'O' : chunk[0];
    // chunk[1:].split('-', maxsplit=1)[-1] or '_', chunk[1:] past the first code point
    size_t first = 1;
    while (first < chunk.size() && (static_cast<unsigned char>(chunk[first]) & 0xC0) == 0x80) ++first;
    const std::string rest = chunk.size() > first ? chunk.substr(first) : "";
    const size_t dash = rest.find('-');
    std::string type = dash == std::string::npos ? rest : rest.substr(dash + 1);
    if (type.empty()) type = "_";
    if (end_of_chunk(prev_tag, tag, prev_type, type)) chunks.push_back({prev_type, begin, static_cast<int64_t>(i) - 1});
    if (start_of_chunk(prev_tag, tag, prev_type, type)) begin = static_cast<int64_t>(i);
    prev_tag = tag, prev_type = type;
  }
  return chunks;
}

Json entity_scores(const std::vector<std::vector<std::string>>& gold, const std::vector<std::vector<std::string>>& predicted) {
  check_input(gold.size() == predicted.size(), "entity scores: gold and predicted hold different numbers of sentences");
  int64_t words = 0, correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    check_input(gold[i].size() == predicted[i].size(), "entity scores: sentence " + std::to_string(i) + " differs in length");
    for (size_t k = 0; k < gold[i].size(); ++k) correct += gold[i][k] == predicted[i][k];
    words += static_cast<int64_t>(gold[i].size());
  }
  const auto true_list = get_entities(gold), pred_list = get_entities(predicted);
  const std::set<Entity> truth(true_list.begin(), true_list.end()), pred(pred_list.begin(), pred_list.end());
  std::set<std::string> types;
  for (const auto& e : truth) types.insert(e.type);
  for (const auto& e : pred) types.insert(e.type);
  Json per_type = Json::object();
  double tp_all = 0;
  for (const auto& type : types) {
    double tp = 0, n_true = 0, n_pred = 0;
    for (const auto& e : truth) n_true += e.type == type, tp += e.type == type && pred.count(e);
    for (const auto& e : pred) n_pred += e.type == type;
    const double p = ratio(tp, n_pred), r = ratio(tp, n_true);
    per_type[type] = {{"precision", p}, {"recall", r}, {"f1", f1(p, r)}, {"support", static_cast<int64_t>(n_true)}};
    tp_all += tp;
  }
  const double p = ratio(tp_all, static_cast<double>(pred.size())), r = ratio(tp_all, static_cast<double>(truth.size()));
  return {{"precision", p}, {"recall", r}, {"f1", f1(p, r)}, {"accuracy", ratio(static_cast<double>(correct), static_cast<double>(words))},
          {"entities", static_cast<int64_t>(truth.size())}, {"per_type", per_type}};
}

Json evaluate_token_classifier(models::Model& model, const data::TokenClassificationDataset& dataset,
                               const std::map<std::string, int64_t>& tag_map, int64_t batch_size, int32_t pad_id,
                               c10::Device device, std::vector<std::vector<std::string>>* predicted) {
  std::vector<std::string> tag_of(tag_map.size());
  for (const auto& [tag, id] : tag_map) tag_of[static_cast<size_t>(id)] = tag;
  const auto& sentences = dataset.sentences();
  std::vector<std::vector<std::string>> gold, pred;
  for (const auto& s : sentences) gold.push_back(s.tags), pred.emplace_back(s.words.size());
  const data::LoaderOptions lo = data::in_order(batch_size, pad_id);
  // The loader reads the dataset through a shared pointer; this one outlives it.
  data::Loader loader(std::shared_ptr<const data::Dataset>(&dataset, [](const data::Dataset*) {}), lo);
  const int64_t n = loader.batches_per_epoch(0);
  nn::EvalMode eval_mode(model);
  at::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t labelled = 0;
  size_t example = 0;
  for (int64_t i = 0; i < n; ++i) {
    check_stop("evaluation");
    const Batch b = loader.next();
    const Output o = model.forward(b.to(device));
    const int64_t count = b.labels.ne(-100).sum().item<int64_t>();
    loss_sum += o.loss.item<double>() * static_cast<double>(count);
    labelled += count;
    const at::Tensor best = o.logits.argmax(-1).to(at::kCPU).contiguous();  // (B, T)
    auto a = best.accessor<int64_t, 2>();
    for (int64_t r = 0; r < best.size(0); ++r, ++example) {
      const data::WordWindow& w = dataset.windows()[example];
      for (size_t k = 0; k < w.positions.size(); ++k) {
        pred[static_cast<size_t>(w.sentence)][static_cast<size_t>(w.first_word) + k] = tag_of[static_cast<size_t>(a[r][w.positions[k]])];
      }
    }
  }
  Json r = entity_scores(gold, pred);
  r["loss"] = loss_sum / static_cast<double>(std::max<int64_t>(labelled, 1));
  r["sentences"] = static_cast<int64_t>(sentences.size());
  int64_t words = 0;
  for (const auto& s : sentences) words += static_cast<int64_t>(s.words.size());
  r["words"] = words;
  if (predicted) *predicted = std::move(pred);
  return r;
}

std::string predictions_conll(const std::vector<data::TaggedSentence>& sentences,
                              const std::vector<std::vector<std::string>>& predicted) {
  std::string out;
  for (size_t i = 0; i < sentences.size(); ++i) {
    for (size_t k = 0; k < sentences[i].words.size(); ++k) {
      out += sentences[i].words[k] + " " + sentences[i].tags[k] + " " + predicted[i][k] + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace lmkit::eval
