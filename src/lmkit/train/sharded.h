// Optimizer state sharded across the data-parallel ranks (ZeRO stages 1 and 2, Rajbhandari
// et al. 2020; Megatron-LM's distributed optimizer): the gradient reducer reduce-scatters each
// bucket, so rank r holds the summed r-th chunk of every bucket; the registered optimizer runs
// on "pieces" — the parts of the parameters inside those chunks, as views of the parameters —
// so it keeps state for 1/N of the elements; the updated chunks are then all-gathered into every
// rank's parameters. Only an optimizer whose update of an element reads that element's state and
// gradient alone can run on pieces (OptimizerSpec::shardable: AdamW; not LAMB, Adafactor, Muon).
// Checkpoints hold the state gathered whole, in the unsharded optimizer's own format, so a run
// resumes on any number of ranks, sharded or not (docs/distributed.md).
// With overlap_gather(), the all-gather runs while the next forward does: each layer waits only
// for the buckets holding its own parameters (nn/layer_gate.h), as Megatron-LM's
// --overlap-param-gather does.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lmkit/dist/reducer.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/train/optimizer.h"

namespace lmkit::train {

/// The bytes of state `optimizer` holds (a ShardedOptimizer's: this rank's pieces'), for
/// optimizers keeping torch::optim::AdamW's state or TensorState.
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

class ShardedOptimizer : public torch::optim::Optimizer, private nn::LayerGate {
 public:
  /// `reducer` reduce-scatters (its shard 1 or 2); `params` the model's, as make_optimizer takes them.
  ShardedOptimizer(dist::GradientReducer& reducer, const ModelParameters& params, const OptimizerOptions& options);

  /// Updates this rank's pieces from their summed gradients, then all-gathers the parameters
  /// (with overlap_gather(): leaves the gather to begin_forward()).
  at::Tensor step(LossClosure closure = nullptr) override;

  /// From now on the parameters' all-gather overlaps the next forward. `layers`: the modules
  /// whose forward the model's stacks precede with nn::before_layer (nn::gated_layers); the
  /// buckets holding any other parameter are gathered first and waited for before the forward.
  void overlap_gather(const std::vector<const torch::nn::Module*>& layers);
  bool overlapping() const { return overlap_; }
  /// Every rank, before the step's first forward (after the step's other collectives): launches
  /// the last update's all-gather, bucket by bucket in the order the forward needs them, waits
  /// for the buckets outside the layers, and installs the layer gate on this thread.
  void begin_forward();
  /// After that forward, before backward: waits for every bucket, and removes the gate.
  void end_forward();
  /// Of the last forward's gathered buckets, how many a layer waited for (the rest: before the
  /// forward, or after it), and how many there were.
  int64_t buckets_awaited_by_layers() const { return awaited_by_layers_; }
  int64_t buckets_gathered() const { return buckets_this_step_; }
  /// Milliseconds this rank waited for the parameters' all-gather since the last call (at the
  /// step's end, or before the forward and its layers when overlapped), then 0. On NCCL the host
  /// does not wait for a collective, only the device's stream does: the figure is the CPU's (Gloo).
  double take_gather_wait_ms();
  /// Every parameter holds its gathered value (anything reading them outside begin_forward()
  /// and end_forward(): validation, checkpoints, the end of training). Every rank, at the same
  /// point: after a step it launches the gather begin_forward() would have.
  void settle();
  /// Writes the whole state that gather() collected (rank 0, after every rank called gather()).
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Reads a whole state (written by a sharded run or not, on any number of ranks) and keeps this rank's pieces.
  void load(torch::serialize::InputArchive& archive) override;

  /// Every rank: collects the whole state into an unsharded optimizer for save() (a collective).
  void gather();
  /// This rank's chunks of the gradients (what the global norm sums over, with the other ranks').
  std::vector<at::Tensor> shard_gradients() const;
  /// Multiplies every gradient by `scale` in the next step (the clipping coefficient).
  void scale_gradients(double scale);
  /// The bytes of optimizer state this rank holds, and how many parameter elements it updates of all.
  int64_t state_bytes() const;
  int64_t piece_elements() const { return piece_elements_; }
  int64_t total_elements() const { return total_elements_; }

  torch::optim::Optimizer& inner() { return *inner_; }

 private:
  struct Piece {
    size_t place = 0;          ///< in reducer.places()
    int64_t from = 0, len = 0; ///< elements of the flattened parameter
    int64_t chunk_offset = 0;  ///< where they lie in the rank's chunk of the bucket
    at::Tensor view;           ///< the parameter's elements [from, from + len), shaped (1, len) for a matrix's
  };
  void all_gather_parameters();
  /// This rank's elements [a, a + m) of its chunk of `bucket`, from `source(piece)` (undefined: zeros).
  at::Tensor chunk_values(int64_t bucket, int64_t a, int64_t m, const std::function<at::Tensor(const Piece&)>& source) const;
  /// `all` (every rank's elements [a, a + m) of its chunk, in rank order) to `use`, parameter by parameter.
  void spread(int64_t bucket, int64_t a, int64_t m, const at::Tensor& all,
              const std::function<void(size_t place, int64_t from, const at::Tensor& values)>& use) const;
  void launch_gather();                // overlap: the step's all-gathers start (as many as the window holds)
  void launch_more();                  // launches the next buckets of launch_order_ while the window has room
  bool gathered(int64_t bucket) const;  // this step's gather of it is in the parameters
  void finish_gather(int64_t bucket);  // waits for it (launching it first if need be) and copies it in
  void before_layer(const torch::nn::Module& layer) override;
  /// Bucket `bucket` gathered from every rank's chunk: `source(piece)` gives a piece's values
  /// (undefined: zeros), `use(place, from, values)` receives the elements [from, from + n) of
  /// parameter `place` (in reducer.places()) as every rank holds them.
  void gather_chunks(int64_t bucket, const std::function<at::Tensor(const Piece&)>& source,
                     const std::function<void(size_t place, int64_t from, const at::Tensor& values)>& use);
  /// A state tensor of every piece (zeros where a piece has none) gathered whole for each parameter.
  std::vector<at::Tensor> gather_state(const std::string& name);

  dist::GradientReducer& reducer_;
  ModelParameters params_;
  OptimizerOptions options_;
  std::vector<dist::GradientReducer::Place> places_;
  std::vector<Piece> pieces_;
  std::unique_ptr<torch::optim::Optimizer> inner_;  ///< the registered optimizer over the pieces
  mutable std::unique_ptr<torch::optim::Optimizer> whole_;  ///< gather()'s unsharded optimizer (rank 0), until save()
  double scale_ = 1.0;
  int64_t piece_elements_ = 0, total_elements_ = 0;

  // Overlapped gather (overlap_gather()).
  struct Gather {
    at::Tensor mine, all;               ///< this rank's chunk, and every rank's
    std::optional<dist::Work> work;     ///< in flight
  };
  bool overlap_ = false;
  bool stale_ = false;  ///< stepped; the gather is not launched yet
  std::vector<Gather> gathers_;  ///< a bucket's, while in flight
  std::vector<int64_t> launch_order_;  ///< the buckets outside the layers (descending), then the others (descending)
  std::vector<size_t> position_;       ///< each bucket's place in launch_order_
  size_t early_ = 0;  ///< how many of launch_order_ hold a parameter outside the layers
  size_t next_launch_ = 0, in_flight_ = 0;
  size_t window_ = 0;  ///< the most gathers in flight (0: every bucket at once)
  std::map<const torch::nn::Module*, std::vector<int64_t>> layer_buckets_;  ///< the buckets of each layer's parameters
  std::optional<nn::LayerGateScope> gate_;
  int64_t awaited_by_layers_ = 0, buckets_this_step_ = 0;
  double gather_wait_ms_ = 0;
};

}  // namespace lmkit::train
