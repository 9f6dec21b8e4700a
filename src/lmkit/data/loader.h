// Batches from a Dataset: seeded shuffling per epoch, sharding by (rank, world
// size), padding to the batch maximum or a fixed length, optional length
// bucketing, and a background thread that prepares batches ahead of the model.
// Its position (epoch, batch) is what a checkpoint saves and a resumed run restores.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "lmkit/core/batch.h"
#include "lmkit/data/dataset.h"

namespace lmkit::dist {
class Group;
}

namespace lmkit::data {

struct LoaderOptions {
  int64_t batch_size = 32;
  int64_t pad_to = 0;        ///< fixed padded length (0: the longest example of each batch)
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t rank = 0, world_size = 1;
  bool drop_last = true;     ///< drop an epoch's last incomplete batch
  bool bucket_by_length = false;  ///< sort examples by length within windows of 50 batches
  int prefetch = 2;          ///< batches prepared ahead (0: none, batches are made on demand)
  int32_t pad_id = 0;
};

/// `options` for this process of a data-parallel `group` (nullptr: one process): each
/// rank takes its share of every batch of batch_size × world_size (the one place
/// ranks are applied to a loader).
LoaderOptions sharded(LoaderOptions options, const dist::Group* group);

/// An evaluation's batches: every example once, in order (no shuffling, the last batch
/// kept), one batch prepared ahead.
LoaderOptions in_order(int64_t batch_size, int32_t pad_id);

/// Batches per epoch of `dataset` under `options`, without a Loader (no prefetch thread).
int64_t batches_per_epoch(const Dataset& dataset, const LoaderOptions& options, int64_t epoch);

/// What identifies a dataset's examples for a resumed run: "COUNT:HASH", the epoch-0 count and
/// an FNV-1a hash of 64 examples spread evenly over it (their ids, labels, pixels and targets).
/// Another text or corpus than the run's changes it (the cache keys a file by path and date, not
/// content); an edit that keeps the count and touches none of the 64 does not.
std::string fingerprint(const Dataset& dataset);

/// Where a loader is: the next batch to produce.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
};

/// Pads and stacks examples into a Batch: input_ids padded with pad_id,
/// attention_mask 1/0 (undefined when no example is padded), token_type_ids with 0, token labels with -100; class
/// labels (B) int64 or regression targets (B) float; each of Example::row_labels (B) in Batch::extra.
Batch collate(const std::vector<Example>& examples, int32_t pad_id, int64_t pad_to = 0);

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, LoaderPosition start = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// The next batch; after an epoch's last batch, the next epoch begins. With
  /// world_size > 1 and drop_last off, a rank's share of the epoch's last batch may
  /// be empty: a Batch with no tensors.
  Batch next();
  /// The position of the batch next() will return.
  LoaderPosition position() const { return position_; }
  /// Batches per epoch (the same for every rank: batches of batch_size × world_size split between them).
  int64_t batches_per_epoch(int64_t epoch) const;
  /// The example indices (in order) of one batch: a pure function of the position.
  std::vector<int64_t> batch_indices(LoaderPosition position) const;

 private:
  void start_prefetch();
  void stop_prefetch();
  Batch make(LoaderPosition position) const;
  LoaderPosition advance(LoaderPosition p) const;
  /// The epoch's example order (every rank's: each takes its share of each batch). Computed once and shared immutable: the
  /// prefetch thread and the caller may ask for different epochs at a boundary, and
  /// each keeps the snapshot it got.
  std::shared_ptr<const std::vector<int64_t>> epoch_order(int64_t epoch) const;

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  LoaderPosition position_;
  mutable std::mutex order_mutex_;
  mutable int64_t order_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> order_;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<LoaderPosition, Batch>> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace lmkit::data
