#include "lmkit/dist/reducer.h"

#include <ATen/ATen.h>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_set>

#include "lmkit/core/error.h"

namespace lmkit::dist {

namespace {

// Called once a parameter's gradient is accumulated (all of this backward's contributions
// summed into .grad), so that the reducer can take it and free it at once. A hook
// on the tensor itself would fire before that, once per part: a recomputed layer's backward
// asks for its parameters' gradients (nn/recompute.h) before they are summed with their other
// uses (a parameter shared across layers).
struct AccumulatedHook : torch::autograd::PostAccumulateGradHook {
  AccumulatedHook(GradientReducer* reducer, size_t slot) : reducer(reducer), slot(slot) {}
  void operator()(const torch::autograd::Variable&) override { reducer->on_accumulated(slot); }
  GradientReducer* reducer;
  size_t slot;
};

}  // namespace

GradientReducer::GradientReducer(std::shared_ptr<Group> group, const std::vector<at::Tensor>& params, int64_t bucket_bytes,
                                 int shard)
    : group_(std::move(group)), shard_(shard) {
  check_input(group_ != nullptr, "GradientReducer needs a process group");
  std::unordered_set<const void*> seen;
  std::vector<at::Tensor> unique;
  for (const auto& p : params) {
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) unique.push_back(p);
  }
  // Reverse registration order ~ the order backward produces gradients (the head first).
  // A bucket holds one (device, dtype) and closes at bucket_bytes.
  int64_t bytes = 0;
  for (auto it = unique.rbegin(); it != unique.rend(); ++it) {
    const at::Tensor& p = *it;
    const bool fits = !buckets_.empty() && bytes < bucket_bytes &&
                      slots_[buckets_.back().slots.front()].param.options().type_equal(p.options());
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Slot s;
    s.param = p;
    s.bucket = static_cast<int64_t>(buckets_.size()) - 1;
    s.offset = bytes / static_cast<int64_t>(p.element_size());
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    buckets_.back().slots.push_back(slots_.size());
    slots_.push_back(std::move(s));
  }
  const int64_t ranks = shard_ ? group_->size() : 1;
  for (auto& b : buckets_) {
    for (size_t i : b.slots) b.numel += slots_[i].param.numel();
    const int64_t padded = (b.numel + ranks - 1) / ranks * ranks;
    const auto options = slots_[b.slots.front()].param.options().requires_grad(false);
    if (shard_) b.shard = at::zeros({padded / ranks}, options);
    if (shard_ == 2) continue;  // stage 2: each step allocates a bucket's buffer as its gradients come
    b.flat = at::zeros({padded}, options);
    held_bytes_ += static_cast<int64_t>(b.flat.nbytes());
  }
  peak_bytes_ = held_bytes_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    torch::autograd::impl::set_post_acc_grad_hooks(slots_[i].param, std::make_unique<AccumulatedHook>(this, i));
  }
}

GradientReducer::~GradientReducer() {
  for (auto& s : slots_) torch::autograd::impl::set_post_acc_grad_hooks(s.param, nullptr);
}

void GradientReducer::before_backward(bool last_micro_batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = last_micro_batch || shard_ == 2;
  if (!armed_) return;
  first_micro_ = !in_step_;
  if (first_micro_) {
    peak_bytes_ = held_bytes_;
    step_used_.assign(slots_.size(), 0);
  }
  in_step_ = true;
  arm();
}

void GradientReducer::arm() {
  for (auto& s : slots_) s.written = false;
  for (auto& b : buckets_) b.pending = b.slots.size(), b.launched = false;
  next_launch_ = 0;
  work_.clear();
}

void GradientReducer::end_micro_batch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shard_ != 2 || !armed_) return;
  write_unwritten();
  launch_ready();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    merge(b);
    release(buckets_[b]);
  }
  work_.clear();
  armed_ = false;
}

void GradientReducer::merge(size_t b) {
  work_[b].wait();
  Bucket& bucket = buckets_[b];
  if (bucket.merged) return;
  at::NoGradGuard no_grad;
  bucket.shard.add_(bucket.partial);
  bucket.merged = true;
}

void GradientReducer::write_unwritten() {
  // Gradients the hooks did not see: parameters outside this micro-batch's graph (zeros unless
  // earlier micro-batches reached them, below stage 2).
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].param.grad().defined()) step_used_[i] = 1;
    if (slots_[i].written) continue;
    write_slot(i);
    slots_[i].written = true;
    --buckets_[static_cast<size_t>(slots_[i].bucket)].pending;
  }
}

at::Tensor& GradientReducer::flat(Bucket& b) {
  if (!b.flat.defined()) {
    b.flat = at::zeros({b.shard.numel() * group_->size()}, b.shard.options());
    held_bytes_ += static_cast<int64_t>(b.flat.nbytes());
    peak_bytes_ = std::max(peak_bytes_, held_bytes_);
  }
  return b.flat;
}

void GradientReducer::release(Bucket& b) {
  if (!b.flat.defined()) return;
  held_bytes_ -= static_cast<int64_t>(b.flat.nbytes());
  b.flat = at::Tensor();
}

int64_t GradientReducer::bucket_bytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) bytes += static_cast<int64_t>(b.shard.defined() ? b.shard.nbytes() * group_->size() : b.flat.nbytes());
  return bytes;
}

void GradientReducer::write_slot(size_t i) {
  Slot& s = slots_[i];
  at::NoGradGuard no_grad;
  at::Tensor dst = flat(buckets_[static_cast<size_t>(s.bucket)]).narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
  const at::Tensor& grad = s.param.grad();  // every micro-batch of this step, summed
  if (grad.defined()) {
    dst.copy_(grad);
  } else {
    dst.zero_();
  }
}

void GradientReducer::on_accumulated(size_t i) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!armed_ || slots_[i].written) return;
  }
  write_slot(i);
  // The whole gradient lives until it is in its bucket (finish() then points .grad into the
  // bucket, or leaves it empty when sharded): held once, not twice, during backward.
  slots_[i].param.mutable_grad() = at::Tensor();
  std::lock_guard<std::mutex> lock(mutex_);
  step_used_[i] = 1;
  slots_[i].written = true;
  --buckets_[static_cast<size_t>(slots_[i].bucket)].pending;
  launch_ready();
}

void GradientReducer::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    at::Tensor* out = &b.shard;
    if (!first_micro_) {  // stage 2, a later micro-batch: its chunk is added once reduced
      if (!b.partial.defined()) b.partial = at::empty_like(b.shard);
      out = &b.partial;
      b.merged = false;
    }
    work_.push_back(shard_ ? group_->reduce_scatter_sum_async(*out, flat(b)) : group_->all_reduce_sum_async(b.flat));
    b.launched = true;
    if (shard_ == 2 && next_launch_ > 0) {
      // Stage 2: the bucket before this one has had this one's filling to reduce; once it is
      // done its whole buffer goes (its chunk is in its `shard`).
      merge(next_launch_ - 1);
      release(buckets_[next_launch_ - 1]);
    }
    ++next_launch_;
  }
}

c10::Device GradientReducer::device() const {
  return slots_.empty() ? c10::Device(c10::kCPU) : slots_.front().param.device();
}

std::vector<double> GradientReducer::sum(const std::vector<double>& values) { return group_->sum(values, device()); }

std::vector<double> GradientReducer::finish(const std::vector<double>& scalars) {
  std::vector<uint8_t> used;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!armed_) {  // no backward armed this step (a caller without before_backward)
      step_used_.assign(slots_.size(), 0);
      arm();
    }
    write_unwritten();
    used = step_used_;
    launch_ready();
    armed_ = false;
    in_step_ = false;
  }
  // The scalars and which parameters had a gradient, summed in one more all-reduce.
  at::Tensor extra = at::zeros({static_cast<int64_t>(scalars.size() + used.size())}, at::kDouble);
  auto e = extra.accessor<double, 1>();
  for (size_t i = 0; i < scalars.size(); ++i) e[static_cast<int64_t>(i)] = scalars[i];
  for (size_t i = 0; i < used.size(); ++i) e[static_cast<int64_t>(scalars.size() + i)] = used[i];
  at::Tensor reduced = extra.to(device());
  Work extra_work = group_->all_reduce_sum_async(reduced);
  for (size_t b = 0; b < work_.size(); ++b) {
    if (shard_ == 2) merge(b);
    work_[b].wait();
  }
  work_.clear();
  extra_work.wait();
  reduced = reduced.cpu();
  auto r = reduced.accessor<double, 1>();
  at::NoGradGuard no_grad;
  used_.assign(slots_.size(), 0);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    used_[i] = r[static_cast<int64_t>(scalars.size() + i)] > 0;
    if (shard_) {
      // Only this rank's chunks are summed: no parameter holds a whole gradient (Shard reads the chunks).
      s.param.mutable_grad() = at::Tensor();
    } else if (used_[i]) {
      s.param.mutable_grad() =
          buckets_[static_cast<size_t>(s.bucket)].flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
    } else {
      s.param.mutable_grad() = at::Tensor();
    }
  }
  if (shard_ == 2) {
    for (auto& b : buckets_) release(b);  // stage 2: the rank keeps its chunks only
  }
  std::vector<double> out(scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) out[i] = r[static_cast<int64_t>(i)];
  return out;
}

std::vector<GradientReducer::Place> GradientReducer::places() const {
  std::vector<Place> out;
  for (const auto& s : slots_) out.push_back({s.param, s.bucket, s.offset});
  return out;
}

}  // namespace lmkit::dist
