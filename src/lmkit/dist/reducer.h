// Gradient all-reduce for data-parallel training, overlapped with the backward
// pass as PyTorch's DistributedDataParallel does it: parameters are grouped into
// buckets (~25 MB, in reverse registration order, the order backward produces
// their gradients); a hook on each parameter, run once backward has summed its gradient into
// .grad, copies it into the bucket, and a full bucket is summed over ranks asynchronously while backward goes on.
// Sharded (ZeRO, Rajbhandari et al. 2020): each bucket is reduce-scattered instead, so
// that rank r receives the sum of the bucket's r-th chunk only (its optimizer shard).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lmkit/dist/group.h"

namespace lmkit::dist {

class GradientReducer {
 public:
  /// `params`: the trainable parameters (duplicates, e.g. tied weights, counted once).
  /// `shard`: 0 all-reduces; 1 reduce-scatters each bucket (ZeRO stage 1: the rank's chunk
  /// of every bucket summed, Shard::gradient); 2 as 1, and a bucket's full buffer is freed as
  /// soon as its reduce-scatter is done — when the next bucket launches, so that backward
  /// holds at most two whole buckets (the one in flight and the one filling) and between
  /// steps a rank holds only its chunks of the gradients (ZeRO stage 2).
  GradientReducer(std::shared_ptr<Group> group, const std::vector<at::Tensor>& params,
                  int64_t bucket_bytes = int64_t{25} << 20, int shard = 0);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Call before each backward of a step: the hooks act on the last micro-batch's
  /// (the gradients of earlier ones accumulate in .grad as usual). Stage 2 acts on every
  /// micro-batch's: each is reduce-scattered and added to the rank's chunks, so no whole
  /// gradient outlives its bucket (DeepSpeed's ZeRO-2 with accumulation); end_micro_batch()
  /// after each but the last.
  void before_backward(bool last_micro_batch);
  /// Stage 2, after a micro-batch that is not the step's last (on every rank, whether it had
  /// data or not): reduces what its hooks did not (zeros), waits, and adds its chunks in.
  /// Otherwise nothing.
  void end_micro_batch();

  /// After the step's backward passes: launches the buckets not yet launched, sums
  /// `scalars` over ranks along with them (one more small all-reduce), waits, and
  /// leaves in every parameter's .grad the sum over ranks — a view into its bucket.
  /// A parameter that received no gradient on any rank keeps an undefined .grad, as
  /// in a single process. Returns the summed scalars.
  std::vector<double> finish(const std::vector<double>& scalars);

  /// Sums a few numbers over ranks now (through the parameters' device, as NCCL needs).
  std::vector<double> sum(const std::vector<double>& values);

  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  /// 0 all-reduces; 1 or 2: ZeRO's stage (the constructor's `shard`).
  int stage() const { return shard_; }

  /// With `shard`: a parameter's place in its bucket, and the rank's chunk of each bucket.
  struct Place {
    at::Tensor param;
    int64_t bucket = 0, offset = 0;  ///< elements from the bucket's start
  };
  std::vector<Place> places() const;
  /// Bucket b's chunk length (its padded length / size(); chunk r starts at r × chunk).
  int64_t chunk(int64_t bucket) const { return buckets_[static_cast<size_t>(bucket)].shard.numel(); }
  /// This rank's chunk of bucket b's gradient, summed over ranks (after finish()).
  const at::Tensor& shard_gradient(int64_t bucket) const { return buckets_[static_cast<size_t>(bucket)].shard; }
  /// Stage 1, from finish() to the next step's last backward: bucket b's whole buffer, idle then
  /// (a sharded optimizer gathers the parameters into it); otherwise undefined.
  at::Tensor idle_buffer(int64_t bucket) const {
    return shard_ == 1 && !armed_ ? buckets_[static_cast<size_t>(bucket)].flat : at::Tensor();
  }
  /// After finish(): whether parameter i of places() had a gradient on some rank this step.
  bool used(size_t i) const { return used_[i] != 0; }
  /// The most bytes of whole bucket buffers held at once during the last step (from
  /// before_backward of its last micro-batch to finish), and in all. Stage 2's is what it
  /// saves: at most two buckets' against every bucket's.
  int64_t peak_bucket_bytes() const { return peak_bytes_; }
  int64_t bucket_bytes() const;
  std::shared_ptr<Group> group() const { return group_; }

  /// The hook after a parameter's gradient is accumulated: into its bucket, then freed.
  void on_accumulated(size_t slot);

 private:
  struct Slot {
    at::Tensor param;
    int64_t bucket = 0, offset = 0;
    bool written = false;  ///< the bucket holds this step's gradient
  };
  struct Bucket {
    at::Tensor flat;   ///< every slot's gradient (sharded: padded to a multiple of the ranks)
    at::Tensor shard;  ///< sharded: this rank's chunk of `flat`, summed over ranks
    int64_t numel = 0;
    std::vector<size_t> slots;
    size_t pending = 0;  ///< slots not yet written this step
    bool launched = false;
    at::Tensor partial;  ///< stage 2, a micro-batch after the step's first: its chunk, added to `shard`
    bool merged = true;  ///< `partial` is in `shard`
  };
  void launch_ready();  // with mutex_ held: buckets in index order, so every rank issues the same sequence
  void write_unwritten();          // with mutex_ held: the slots no hook wrote, from .grad or zeros
  void merge(size_t bucket);       // stage 2: its reduce-scatter waited for, a later micro-batch's chunk added
  void arm();                      // with mutex_ held: every slot pending, nothing launched
  void write_slot(size_t slot);  // .grad (or zeros) into the slot's place in its bucket
  at::Tensor& flat(Bucket& b);  // allocated on first use (stage 2 frees it once reduced)
  void release(Bucket& b);      // stage 2: frees b's whole buffer
  c10::Device device() const;

  std::shared_ptr<Group> group_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<Work> work_;
  size_t next_launch_ = 0;
  bool armed_ = false;
  bool in_step_ = false;      ///< stage 2: a micro-batch of this step was reduced (the next ones add)
  bool first_micro_ = true;   ///< stage 2: this micro-batch's chunks go straight into `shard`
  int shard_ = 0;
  std::vector<uint8_t> used_;
  std::vector<uint8_t> step_used_;  ///< a slot had a gradient in some micro-batch of this step
  int64_t held_bytes_ = 0, peak_bytes_ = 0;  ///< whole bucket buffers held now, and the step's most
  std::mutex mutex_;
};

}  // namespace lmkit::dist
