#include "lmkit/train/sharded.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/train/adamw.h"

namespace lmkit::train {

namespace {

// The state tensors of one parameter, by name, for the two state kinds lmkit's optimizers keep:
// torch::optim::AdamW's (FusedAdamW) and TensorState (StatefulOptimizer: Adafactor, LAMB, Muon, plugins).
std::map<std::string, at::Tensor*> state_tensors(torch::optim::OptimizerParamState& state) {
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(&state)) {
    return {{"exp_avg", &adamw->exp_avg()}, {"exp_avg_sq", &adamw->exp_avg_sq()}};
  }
  if (auto* tensors = dynamic_cast<TensorState*>(&state)) {
    std::map<std::string, at::Tensor*> out;
    for (auto& [name, t] : tensors->tensors) out[name] = &t;
    return out;
  }
  throw RuntimeError("--shard-optimizer: the optimizer keeps a state lmkit cannot shard (neither AdamW's nor TensorState)");
}

int64_t state_step(const torch::optim::OptimizerParamState& state) {
  if (auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(&state)) return adamw->step();
  return static_cast<const TensorState&>(state).step;
}

// A new, empty state of the kind `optimizer` keeps, with `step`.
std::unique_ptr<torch::optim::OptimizerParamState> empty_state(const torch::optim::Optimizer& optimizer, int64_t step) {
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step);
    return s;
  }
  auto s = std::make_unique<TensorState>();
  s->step = step;
  return s;
}

void set_state_tensor(torch::optim::OptimizerParamState& state, const std::string& name, const at::Tensor& value) {
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(&state)) {
    name == "exp_avg" ? adamw->exp_avg(value) : adamw->exp_avg_sq(value);
  } else {
    static_cast<TensorState&>(state).tensors[name] = value;
  }
}

// Adds its lifetime in milliseconds to `total`.
class WaitTimer {
 public:
  explicit WaitTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() { total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count(); }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// Elements [from, from + n) of a parameter, gathered from the ranks that updated them.
void copy_into(const dist::GradientReducer::Place& place, int64_t from, const at::Tensor& values) {
  place.param.detach().view({-1}).narrow(0, from, values.numel()).copy_(values);
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(dist::GradientReducer& reducer, const ModelParameters& params,
                                   const OptimizerOptions& options)
    : torch::optim::Optimizer(std::vector<torch::optim::OptimizerParamGroup>{}, std::make_unique<GroupOptions>()),
      reducer_(reducer), params_(params), options_(options), places_(reducer.places()) {
  ParallelFlags flags;
  flags.shard_optimizer = 1;
  check_parallel_flags(flags, options.name, true);
  std::map<const void*, std::string> names;
  for (const auto& [name, p] : params.named) names[p.unsafeGetTensorImpl()] = name;
  const int64_t rank = reducer.group()->rank();
  ModelParameters pieces;
  pieces.tables = params.tables;
  for (size_t i = 0; i < places_.size(); ++i) {
    const auto& place = places_[i];
    const int64_t chunk = reducer.chunk(place.bucket), numel = place.param.numel();
    total_elements_ += numel;
    const int64_t lo = std::max(place.offset, rank * chunk), hi = std::min(place.offset + numel, (rank + 1) * chunk);
    if (lo >= hi) continue;
    Piece piece{i, lo - place.offset, hi - lo, lo - rank * chunk, {}};
    // A view of the parameter's storage, so that the update writes into the model; a matrix's piece
    // stays 2-D so that weight decay groups it as the matrix.
    piece.view = place.param.detach().view({-1}).narrow(0, piece.from, piece.len);
    if (place.param.dim() >= 2) piece.view = piece.view.view({1, piece.len});
    piece_elements_ += piece.len;
    pieces.named.emplace_back(names.count(place.param.unsafeGetTensorImpl()) ? names[place.param.unsafeGetTensorImpl()] : "",
                              piece.view);
    pieces_.push_back(std::move(piece));
  }
  inner_ = make_optimizer(pieces, options);
}

at::Tensor ShardedOptimizer::step(LossClosure closure) {
  check_input(!closure, "a sharded optimizer takes no closure");
  at::NoGradGuard no_grad;
  for (auto& piece : pieces_) {
    const auto& place = places_[piece.place];
    piece.view.mutable_grad() =
        reducer_.used(piece.place)
            ? reducer_.shard_gradient(place.bucket).narrow(0, piece.chunk_offset, piece.len).view(piece.view.sizes())
            : at::Tensor();
  }
  if (scale_ != 1.0) {
    if (auto* fused = dynamic_cast<FusedAdamW*>(inner_.get())) {
      fused->set_grad_scale(scale_);
    } else {
      for (auto& piece : pieces_) {
        if (piece.view.grad().defined()) piece.view.mutable_grad().mul_(scale_);
      }
    }
    scale_ = 1.0;
  }
  inner_->step();
  if (overlap_) {
    stale_ = true;  // gathered while the next forward runs (begin_forward), or by settle()
  } else {
    all_gather_parameters();
  }
  return {};
}

at::Tensor ShardedOptimizer::chunk_values(int64_t bucket, int64_t a, int64_t m,
                                          const std::function<at::Tensor(const Piece&)>& source) const {
  at::Tensor mine = at::zeros({m}, reducer_.shard_gradient(bucket).options());
  for (const auto& piece : pieces_) {
    if (places_[piece.place].bucket != bucket) continue;
    const int64_t lo = std::max(piece.chunk_offset, a), hi = std::min(piece.chunk_offset + piece.len, a + m);
    if (lo >= hi) continue;
    const at::Tensor values = source(piece);
    if (values.defined()) mine.narrow(0, lo - a, hi - lo).copy_(values.reshape({-1}).narrow(0, lo - piece.chunk_offset, hi - lo));
  }
  return mine;
}

void ShardedOptimizer::spread(int64_t bucket, int64_t a, int64_t m, const at::Tensor& all,
                              const std::function<void(size_t place, int64_t from, const at::Tensor& values)>& use) const {
  // Rank r's elements [a, a + m) of its chunk lie at r × chunk + a of the bucket.
  const int64_t chunk = reducer_.chunk(bucket), ranks = reducer_.group()->size();
  for (size_t i = 0; i < places_.size(); ++i) {
    const auto& place = places_[i];
    if (place.bucket != bucket) continue;
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t start = r * chunk + a;
      const int64_t lo = std::max(place.offset, start), hi = std::min(place.offset + place.param.numel(), start + m);
      if (lo < hi) use(i, lo - place.offset, all.narrow(0, r * m + lo - start, hi - lo));
    }
  }
}

void ShardedOptimizer::gather_chunks(int64_t bucket, const std::function<at::Tensor(const Piece&)>& source,
                                     const std::function<void(size_t place, int64_t from, const at::Tensor& values)>& use) {
  // At most kGatherElements of each rank's chunk at a time: the all-gather's buffer stays small
  // (ranks × 4 MB) instead of a whole bucket's.
  constexpr int64_t kGatherElements = int64_t{1} << 20;
  auto& group = *reducer_.group();
  const int64_t chunk = reducer_.chunk(bucket), ranks = group.size();
  for (int64_t a = 0; a < chunk; a += kGatherElements) {
    const int64_t m = std::min(kGatherElements, chunk - a);
    const at::Tensor mine = chunk_values(bucket, a, m, source);
    at::Tensor all = at::empty({ranks * m}, mine.options());
    group.all_gather(all, mine);
    spread(bucket, a, m, all, use);
  }
}

double ShardedOptimizer::take_gather_wait_ms() {
  const double ms = gather_wait_ms_;
  gather_wait_ms_ = 0;
  return ms;
}

void ShardedOptimizer::all_gather_parameters() {
  const WaitTimer timer(gather_wait_ms_);
  at::NoGradGuard no_grad;
  for (int64_t b = 0; b < reducer_.buckets(); ++b) {
    gather_chunks(b, [](const Piece& piece) { return piece.view; },
                  [&](size_t place, int64_t from, const at::Tensor& values) { copy_into(places_[place], from, values); });
  }
}

void ShardedOptimizer::overlap_gather(const std::vector<const torch::nn::Module*>& layers) {
  std::map<const void*, int64_t> bucket_of;
  for (const auto& place : places_) bucket_of[place.param.unsafeGetTensorImpl()] = place.bucket;
  std::set<const void*> inside;
  for (const auto* layer : layers) {
    std::set<int64_t> buckets;
    for (const auto& p : layer->parameters()) {
      auto it = bucket_of.find(p.unsafeGetTensorImpl());
      if (it == bucket_of.end()) continue;  // frozen
      buckets.insert(it->second);
      inside.insert(it->first);
    }
    layer_buckets_[layer] = std::vector<int64_t>(buckets.begin(), buckets.end());
  }
  // Every rank computes the same order from the same model: the collectives stay in step.
  std::vector<uint8_t> outside(static_cast<size_t>(reducer_.buckets()), 0);
  for (const auto& [param, bucket] : bucket_of) {
    if (!inside.count(param)) outside[static_cast<size_t>(bucket)] = 1;
  }
  launch_order_.clear();
  for (int pass = 0; pass < 2; ++pass) {
    // Backward fills buckets from the last parameters: the forward needs them in reverse.
    for (int64_t b = reducer_.buckets() - 1; b >= 0; --b) {
      if (outside[static_cast<size_t>(b)] == (pass == 0 ? 1 : 0)) launch_order_.push_back(b);
    }
    if (pass == 0) early_ = launch_order_.size();
  }
  position_.assign(launch_order_.size(), 0);
  for (size_t i = 0; i < launch_order_.size(); ++i) position_[static_cast<size_t>(launch_order_[i])] = i;
  next_launch_ = launch_order_.size();  // nothing to gather before the first step
  gathers_.assign(static_cast<size_t>(reducer_.buckets()), Gather{});
  // Stage 1 gathers into its idle gradient buffers; stage 2, which keeps no whole bucket between
  // steps, holds at most two gathered buckets at a time, as its backward holds two gradient buckets.
  window_ = reducer_.stage() == 2 ? 2 : 0;
  overlap_ = true;
}

void ShardedOptimizer::launch_gather() {
  stale_ = false;
  next_launch_ = 0;
  in_flight_ = 0;
  launch_more();
}

void ShardedOptimizer::launch_more() {
  // In launch_order_ on every rank: the collectives stay in step whenever each rank launches them.
  at::NoGradGuard no_grad;
  auto& group = *reducer_.group();
  while (next_launch_ < launch_order_.size() && (window_ == 0 || in_flight_ < window_)) {
    const int64_t b = launch_order_[next_launch_++];
    Gather& g = gathers_[static_cast<size_t>(b)];
    g.mine = chunk_values(b, 0, reducer_.chunk(b), [](const Piece& piece) { return piece.view; });
    g.all = reducer_.idle_buffer(b);  // stage 1's gradient buffer is idle until the next backward
    if (!g.all.defined()) g.all = at::empty({g.mine.numel() * group.size()}, g.mine.options());
    g.work = group.all_gather_async(g.all, g.mine);
    ++in_flight_;
  }
}

bool ShardedOptimizer::gathered(int64_t bucket) const {
  return position_[static_cast<size_t>(bucket)] < next_launch_ && !gathers_[static_cast<size_t>(bucket)].work;
}

void ShardedOptimizer::finish_gather(int64_t bucket) {
  const size_t position = position_[static_cast<size_t>(bucket)];
  // Stage 2's window: the buckets before this one are finished (each launching the next) until it is launched.
  for (size_t i = 0; next_launch_ <= position && i < position; ++i) finish_gather(launch_order_[i]);
  Gather& g = gathers_[static_cast<size_t>(bucket)];
  if (!g.work) return;
  {
    const WaitTimer timer(gather_wait_ms_);
    g.work->wait();
  }
  g.work.reset();
  --in_flight_;
  at::NoGradGuard no_grad;
  spread(bucket, 0, reducer_.chunk(bucket), g.all,
         [&](size_t place, int64_t from, const at::Tensor& values) { copy_into(places_[place], from, values); });
  g = Gather{};
  launch_more();  // stage 2: the next bucket takes this one's place in the window
}

void ShardedOptimizer::begin_forward() {
  if (!overlap_) return;
  if (stale_) {
    launch_gather();
    awaited_by_layers_ = 0;
    buckets_this_step_ = static_cast<int64_t>(launch_order_.size());
  }
  for (size_t i = 0; i < early_; ++i) finish_gather(launch_order_[i]);
  gate_.emplace(static_cast<nn::LayerGate*>(this));
}

void ShardedOptimizer::before_layer(const torch::nn::Module& layer) {
  // A layer overlap_gather() was not given has its parameters in the early buckets, waited for already.
  auto it = layer_buckets_.find(&layer);
  if (it == layer_buckets_.end()) return;
  for (int64_t b : it->second) {
    if (!gathered(b)) ++awaited_by_layers_;
    finish_gather(b);
  }
}

void ShardedOptimizer::end_forward() {
  gate_.reset();
  settle();
}

void ShardedOptimizer::settle() {
  if (!overlap_) return;
  if (stale_) launch_gather();
  for (int64_t b : launch_order_) finish_gather(b);
}

std::vector<at::Tensor> ShardedOptimizer::gather_state(const std::string& name) {
  // Only rank 0 writes checkpoints: the others join the collectives and keep nothing.
  const bool keep = reducer_.group()->leader();
  std::vector<at::Tensor> out(places_.size());
  if (keep) {
    for (size_t i = 0; i < places_.size(); ++i) out[i] = at::zeros_like(places_[i].param.detach());
  }
  auto source = [&](const Piece& piece) -> at::Tensor {
    auto it = inner_->state().find(piece.view.unsafeGetTensorImpl());
    if (it == inner_->state().end()) return {};
    const auto tensors = state_tensors(*it->second);
    return tensors.count(name) ? *tensors.at(name) : at::Tensor();
  };
  for (int64_t b = 0; b < reducer_.buckets(); ++b) {
    gather_chunks(b, source, [&](size_t place, int64_t from, const at::Tensor& values) {
      if (keep) out[place].view({-1}).narrow(0, from, values.numel()).copy_(values);
    });
  }
  return out;
}

void ShardedOptimizer::gather() {
  settle();  // the parameters a checkpoint saves beside this state
  // Each parameter's step count: every rank holding a piece of it has the same one.
  std::vector<double> counts(2 * places_.size(), 0.0);
  std::set<std::string> names;
  for (const auto& piece : pieces_) {
    auto it = inner_->state().find(piece.view.unsafeGetTensorImpl());
    if (it == inner_->state().end()) continue;
    counts[2 * piece.place] = static_cast<double>(state_step(*it->second));
    counts[2 * piece.place + 1] = 1;
    for (const auto& [name, t] : state_tensors(*it->second)) names.insert(name);
  }
  counts.push_back(static_cast<double>(names.size()));
  const std::vector<double> summed = reducer_.sum(counts);
  check_input(summed.back() == static_cast<double>(names.size() * reducer_.group()->size()),
              "--shard-optimizer: the ranks keep different kinds of optimizer state");
  std::map<std::string, std::vector<at::Tensor>> gathered;
  for (const auto& name : names) gathered[name] = gather_state(name);
  if (!reducer_.group()->leader()) return;
  whole_ = make_optimizer(params_, options_);
  std::map<const void*, size_t> place_of;
  for (size_t i = 0; i < places_.size(); ++i) place_of[places_[i].param.unsafeGetTensorImpl()] = i;
  for (const auto& [key, i] : place_of) {
    if (summed[2 * i + 1] == 0) continue;  // no rank has stepped it yet
    auto state = empty_state(*whole_, static_cast<int64_t>(summed[2 * i] / summed[2 * i + 1]));
    for (const auto& [name, tensors] : gathered) set_state_tensor(*state, name, tensors[i]);
    whole_->state()[const_cast<void*>(key)] = std::move(state);
  }
}

void ShardedOptimizer::save(torch::serialize::OutputArchive& archive) const {
  if (!whole_) throw RuntimeError("a sharded optimizer saves what gather() collected: every rank calls gather() first");
  whole_->save(archive);
  whole_.reset();  // the whole state lives only while rank 0 writes it
}

void ShardedOptimizer::load(torch::serialize::InputArchive& archive) {
  auto whole = make_optimizer(params_, options_);
  whole->load(archive);
  for (const auto& piece : pieces_) {
    const auto& place = places_[piece.place];
    auto it = whole->state().find(place.param.unsafeGetTensorImpl());
    if (it == whole->state().end()) continue;
    auto state = empty_state(*inner_, state_step(*it->second));
    for (const auto& [name, t] : state_tensors(*it->second)) {
      set_state_tensor(*state, name, t->reshape({-1}).narrow(0, piece.from, piece.len).view(piece.view.sizes()).clone());
    }
    inner_->state()[piece.view.unsafeGetTensorImpl()] = std::move(state);
  }
}

std::vector<at::Tensor> ShardedOptimizer::shard_gradients() const {
  std::vector<at::Tensor> out;
  for (int64_t b = 0; b < reducer_.buckets(); ++b) out.push_back(reducer_.shard_gradient(b));
  return out;
}

void ShardedOptimizer::scale_gradients(double scale) { scale_ = scale; }

int64_t ShardedOptimizer::state_bytes() const { return optimizer_state_bytes(*inner_); }

int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(&optimizer)) return sharded->state_bytes();
  int64_t bytes = 0;
  for (auto& [key, state] : optimizer.state()) {
    for (const auto& [name, t] : state_tensors(*state)) bytes += static_cast<int64_t>(t->nbytes());
  }
  return bytes;
}

}  // namespace lmkit::train
