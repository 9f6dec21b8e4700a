// Optimizer state sharded across the data-parallel ranks (ZeRO stages 1 and 2, Rajbhandari
// et al. 2020; Megatron-LM's distributed optimizer): the gradient reducer reduce-scatters each
// bucket, so rank r holds the summed r-th chunk of every bucket; the registered optimizer runs
// on "pieces" — the parts of the parameters inside those chunks, as views of the parameters —
// so it keeps state for 1/N of the elements; the updated chunks are then all-gathered into every
// rank's parameters. Only an optimizer whose update of an element reads that element's state and
// gradient alone can run on pieces (OptimizerSpec::shardable: AdamW; not LAMB, Adafactor, Muon).
// Checkpoints hold the state gathered whole, in the unsharded optimizer's own format, so a run
// resumes on any number of ranks, sharded or not (docs/distributed.md).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/dist/reducer.h"
#include "lmkit/train/optimizer.h"

namespace lmkit::train {

/// The bytes of state `optimizer` holds (a ShardedOptimizer's: this rank's pieces'), for
/// optimizers keeping torch::optim::AdamW's state or TensorState.
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

class ShardedOptimizer : public torch::optim::Optimizer {
 public:
  /// `reducer` reduce-scatters (its shard 1 or 2); `params` the model's, as make_optimizer takes them.
  ShardedOptimizer(dist::GradientReducer& reducer, const ModelParameters& params, const OptimizerOptions& options);

  /// Updates this rank's pieces from their summed gradients, then all-gathers the parameters.
  at::Tensor step(LossClosure closure = nullptr) override;
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
};

}  // namespace lmkit::train
