#include "lmkit/data/loader.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "lmkit/core/error.h"
#include "lmkit/dist/group.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::data {

namespace {

// One row per example of the sequence `field` picks, right-padded with `fill` to `width`.
at::Tensor padded_rows(const std::vector<Example>& examples, std::vector<int32_t> Example::*field, int64_t width, int64_t fill) {
  at::Tensor out = at::full({static_cast<int64_t>(examples.size()), width}, fill, at::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (size_t i = 0; i < examples.size(); ++i) {
    const auto& row = examples[i].*field;
    for (size_t j = 0; j < row.size(); ++j) a[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = row[j];
  }
  return out;
}

// The longest sequence `field` picks.
int64_t longest(const std::vector<Example>& examples, std::vector<int32_t> Example::*field) {
  size_t n = 0;
  for (const auto& e : examples) n = std::max(n, (e.*field).size());
  return static_cast<int64_t>(n);
}

// Sequence-level labels: a class each, or a regression target each.
void set_example_labels(const std::vector<Example>& examples, Batch& batch) {
  const Example& first = examples.front();
  for (size_t k = 0; k < first.row_labels.size(); ++k) {
    const std::string& name = first.row_labels[k].first;
    std::vector<int64_t> v;
    for (const auto& e : examples) {
      check_input(k < e.row_labels.size() && e.row_labels[k].first == name,
                  "examples of one batch differ in their labels ('" + name + "')");
      v.push_back(e.row_labels[k].second);
    }
    batch.extra[name] = at::tensor(v, at::kLong);
  }
  if (first.class_label >= 0) {
    std::vector<int64_t> v;
    for (const auto& e : examples) v.push_back(e.class_label);
    batch.labels = at::tensor(v, at::kLong);
  } else if (!std::isnan(first.target)) {
    std::vector<float> v;
    for (const auto& e : examples) v.push_back(static_cast<float>(e.target));
    batch.labels = at::tensor(v, at::kFloat);
  }
}

}  // namespace

namespace {

// Images: their pixels stacked (B, C, H, W), MAE's noise (B, patches), class labels (B).
Batch collate_images(const std::vector<Example>& examples) {
  const Example& first = examples.front();
  const int64_t b = static_cast<int64_t>(examples.size());
  std::vector<int64_t> shape = {b};
  shape.insert(shape.end(), first.image_shape.begin(), first.image_shape.end());
  at::Tensor pixels = at::empty(shape, at::kFloat);
  at::Tensor noise = first.patch_noise.empty() ? at::Tensor() : at::empty({b, static_cast<int64_t>(first.patch_noise.size())}, at::kFloat);
  for (int64_t i = 0; i < b; ++i) {
    const Example& e = examples[static_cast<size_t>(i)];
    check_input(e.image_shape == first.image_shape && e.patch_noise.size() == first.patch_noise.size(),
                "examples of one batch differ in their image sizes");
    std::copy(e.pixels.begin(), e.pixels.end(), pixels[i].data_ptr<float>());
    if (noise.defined()) std::copy(e.patch_noise.begin(), e.patch_noise.end(), noise[i].data_ptr<float>());
  }
  Batch batch;
  batch.extra[kPixelValues] = pixels;
  if (noise.defined()) batch.extra[kMaeNoise] = noise;
  set_example_labels(examples, batch);
  return batch;
}

}  // namespace

Batch collate(const std::vector<Example>& examples, int32_t pad_id, int64_t pad_to) {
  check_input(!examples.empty(), "collate: no examples");
  if (examples.front().input_ids.empty() && !examples.front().pixels.empty()) return collate_images(examples);
  int64_t t = longest(examples, &Example::input_ids);
  if (pad_to > 0) {
    check_input(t <= pad_to, "an example of " + std::to_string(t) + " tokens exceeds the fixed length " + std::to_string(pad_to));
    t = pad_to;
  }
  const Example& first = examples.front();
  Batch batch;
  batch.input_ids = padded_rows(examples, &Example::input_ids, t, pad_id);
  // No padding: no mask, as in HF (every position is real). Models then skip the
  // padding bias, which lets causal attention run as the flash kernel on a GPU.
  const bool padded = std::any_of(examples.begin(), examples.end(),
                                  [&](const Example& e) { return static_cast<int64_t>(e.input_ids.size()) < t; });
  if (padded) {
    batch.attention_mask = at::zeros({static_cast<int64_t>(examples.size()), t}, at::kLong);
    auto m = batch.attention_mask.accessor<int64_t, 2>();
    for (size_t i = 0; i < examples.size(); ++i) {
      for (size_t j = 0; j < examples[i].input_ids.size(); ++j) m[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = 1;
    }
  }
  if (!first.token_type_ids.empty()) batch.token_type_ids = padded_rows(examples, &Example::token_type_ids, t, 0);
  if (!first.labels.empty()) {
    // Labels aligned with the inputs (MLM, causal LM) pad with them; targets of
    // their own length (seq2seq, span corruption) pad to their own maximum.
    const bool aligned = std::all_of(examples.begin(), examples.end(), [](const Example& e) { return e.labels.size() == e.input_ids.size(); });
    batch.labels = padded_rows(examples, &Example::labels, aligned ? t : longest(examples, &Example::labels), -100);
  }
  const int64_t dt = longest(examples, &Example::decoder_input_ids);
  if (dt > 0) batch.decoder_input_ids = padded_rows(examples, &Example::decoder_input_ids, dt, pad_id);
  // Packed documents: padding in a document of its own (-1) at position 0.
  if (!first.document_ids.empty()) batch.extra[kDocumentIds] = padded_rows(examples, &Example::document_ids, t, -1);
  if (!first.position_ids.empty()) batch.extra[kPositionIds] = padded_rows(examples, &Example::position_ids, t, 0);
  set_example_labels(examples, batch);
  return batch;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, LoaderPosition start)
    : dataset_(std::move(dataset)), options_(options), position_(start) {
  check_input(options_.batch_size >= 1, "--batch-size must be >= 1");
  check_input(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
              "rank must lie in [0, world size)");
  check_input(batches_per_epoch(position_.epoch) > 0,
              "the data has fewer examples (" + std::to_string(dataset_->size(position_.epoch)) + ") than one batch of " +
                  std::to_string(options_.batch_size) + (options_.world_size > 1 ? " per rank" : ""));
  if (options_.prefetch > 0) start_prefetch();
}

Loader::~Loader() { stop_prefetch(); }

std::shared_ptr<const std::vector<int64_t>> Loader::epoch_order(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(order_mutex_);
  if (order_epoch_ == epoch) return order_;
  const int64_t n = dataset_->size(epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(derive_seed(derive_seed(options_.seed, 0x4c4f4144), static_cast<uint64_t>(epoch)));
  if (options_.shuffle && !dataset_->keeps_order()) shuffle(order, rng);
  if (options_.bucket_by_length) {
    // Similar lengths share a batch (less padding); batches stay in shuffled order.
    const size_t window = static_cast<size_t>(options_.batch_size * options_.world_size * 50);
    for (size_t s = 0; s < order.size(); s += window) {
      auto begin = order.begin() + static_cast<std::ptrdiff_t>(s);
      auto end = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), s + window));
      std::stable_sort(begin, end, [&](int64_t a, int64_t b) { return dataset_->length_hint(a) < dataset_->length_hint(b); });
    }
    const size_t bs = static_cast<size_t>(options_.batch_size * options_.world_size);  // global batches
    std::vector<size_t> batches(order.size() / bs);
    for (size_t i = 0; i < batches.size(); ++i) batches[i] = i;
    if (options_.shuffle && !dataset_->keeps_order()) shuffle(batches, rng);
    std::vector<int64_t> reordered;
    for (size_t bi : batches) reordered.insert(reordered.end(), order.begin() + static_cast<std::ptrdiff_t>(bi * bs),
                                               order.begin() + static_cast<std::ptrdiff_t>((bi + 1) * bs));
    reordered.insert(reordered.end(), order.begin() + static_cast<std::ptrdiff_t>(batches.size() * bs), order.end());
    order = std::move(reordered);
  }
  order_ = std::make_shared<const std::vector<int64_t>>(std::move(order));
  order_epoch_ = epoch;
  return order_;
}

int64_t batches_per_epoch(const Dataset& dataset, const LoaderOptions& o, int64_t epoch) {
  const int64_t n = dataset.size(epoch);
  const int64_t global = o.batch_size * o.world_size;
  return o.drop_last ? n / global : (n + global - 1) / global;
}

LoaderOptions sharded(LoaderOptions options, const dist::Group* group) {
  options.rank = group ? group->rank() : 0;
  options.world_size = group ? group->size() : 1;
  return options;
}

int64_t Loader::batches_per_epoch(int64_t epoch) const {
  return data::batches_per_epoch(*dataset_, options_, epoch);
}

std::vector<int64_t> Loader::batch_indices(LoaderPosition p) const {
  const auto order = epoch_order(p.epoch);  // a snapshot: another epoch may replace the cache meanwhile
  // The global batch of batch_size × world_size examples; this rank takes every
  // world_size-th of them from its rank on, so the ranks' batches together are
  // exactly one process's batch of that size.
  const size_t global = static_cast<size_t>(options_.batch_size * options_.world_size);
  const size_t begin = static_cast<size_t>(p.batch) * global;
  const size_t end = std::min(order->size(), begin + global);
  std::vector<int64_t> indices;
  for (size_t i = begin + static_cast<size_t>(options_.rank); i < end; i += static_cast<size_t>(options_.world_size)) {
    indices.push_back((*order)[i]);
  }
  return indices;
}

LoaderPosition Loader::advance(LoaderPosition p) const {
  if (++p.batch >= batches_per_epoch(p.epoch)) p.batch = 0, ++p.epoch;
  return p;
}

Batch Loader::make(LoaderPosition p) const {
  std::vector<Example> examples;
  for (int64_t i : batch_indices(p)) examples.push_back(dataset_->get(i, p.epoch));
  if (examples.empty()) return {};  // a rank's share of a last batch smaller than the world
  return collate(examples, options_.pad_id, options_.pad_to);
}

void Loader::start_prefetch() {
  stop_ = false;
  worker_ = std::thread([this] {
    LoaderPosition p = position_;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < options_.prefetch; });
        if (stop_) return;
      }
      try {
        Batch b = make(p);
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.emplace_back(p, std::move(b));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
        cv_.notify_all();
        return;
      }
      cv_.notify_all();
      p = advance(p);
    }
  });
}

void Loader::stop_prefetch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  queue_.clear();
}

Batch Loader::next() {
  Batch b;
  if (options_.prefetch > 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty() || error_; });
    if (queue_.empty() && error_) std::rethrow_exception(error_);
    b = std::move(queue_.front().second);
    queue_.pop_front();
    cv_.notify_all();
  } else {
    b = make(position_);
  }
  position_ = advance(position_);
  return b;
}

std::string fingerprint(const Dataset& dataset) {
  std::string bytes;  // the sampled examples' fields, hashed at once
  auto add = [&](const void* data, size_t n) { bytes.append(static_cast<const char*>(data), n); };
  auto ints = [&](const std::vector<int32_t>& v) {
    const uint64_t n = v.size();
    add(&n, sizeof n);
    add(v.data(), v.size() * sizeof(int32_t));
  };
  const int64_t n = dataset.size(0), samples = std::min<int64_t>(n, 64);
  for (int64_t k = 0; k < samples; ++k) {
    const Example e = dataset.get(k * n / samples, 0);
    ints(e.input_ids), ints(e.token_type_ids), ints(e.labels), ints(e.decoder_input_ids);
    add(e.pixels.data(), e.pixels.size() * sizeof(float));
    add(&e.class_label, sizeof e.class_label);
    if (!std::isnan(e.target)) add(&e.target, sizeof e.target);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tokenizer::fnv1a64(bytes)));
  return std::to_string(n) + ":" + hex;
}

LoaderOptions in_order(int64_t batch_size, int32_t pad_id) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = false;
  o.drop_last = false;
  o.pad_id = pad_id;
  o.prefetch = 1;
  return o;
}

}  // namespace lmkit::data
