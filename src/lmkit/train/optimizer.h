// Optimizers, the sixth open kind: AdamW, Adafactor, LAMB and Muon in-tree, others from
// programs and plugins through register_optimizer. An optimizer is a torch::optim::Optimizer
// made from a model's named parameters and OptimizerOptions; its own flags (--NAME-...) are
// declared with it, so lmkit-pretrain and lmkit-finetune offer them, config.json records them
// and --resume checks them (docs/training.md, "Optimizers").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "lmkit/core/config.h"

namespace CLI {
class App;
}

namespace lmkit::train {

/// What every optimizer is made with. `lr` is the schedule's peak (the trainer sets each
/// step's rate with set_learning_rate); `weight_decay` is decoupled and never applies to
/// biases and norm weights (1-D parameters); `beta1`, `beta2`, `eps` are Adam's (AdamW's,
/// LAMB's, the AdamW part of Muon). `own`: the optimizer's own flags by name without dashes
/// ({"adafactor-decay-rate": -0.8}); one it leaves out takes its OptimizerFlag::fallback.
struct OptimizerOptions {
  double lr = 1e-4, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string name = "adamw";
  Json own = Json::object();
};

/// A flag of one optimizer: --NAME-... (the optimizer's name first, so no two collide).
struct OptimizerFlag {
  std::string name;                  ///< without dashes: "adafactor-decay-rate"
  Json fallback;                     ///< its default; a number, a boolean or a string: the type it takes
  std::string help;                  ///< one line for --help
  std::vector<std::string> choices;  ///< a string flag's values (empty: any)
};

/// The parameters an optimizer is made for: the trainable ones in the model's order, by
/// their names (the checkpoint's), and which of them are embedding tables (optimizers that
/// treat matrices apart, as Muon does, leave tables to their AdamW part).
struct ModelParameters {
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::set<std::string> tables;
};

/// A model's trainable parameters and embedding tables (every torch::nn::Embedding's weight and
/// learned position table).
ModelParameters model_parameters(torch::nn::Module& model);

struct OptimizerSpec {
  std::string name;     ///< as --optimizer spells it
  std::string summary;  ///< one line for --help and lmkit-info
  /// Whether --adam-beta1, --adam-beta2 and --adam-eps apply (AdamW, LAMB, Muon's AdamW part).
  bool adam_flags = true;
  /// Whether --shard-optimizer can run it on parts of parameters: its update of an element reads
  /// that element's own state and gradient alone. AdamW's does; LAMB's trust ratio needs each
  /// parameter's whole norm, Adafactor's factored moments whole rows and columns, Muon's
  /// orthogonalisation whole matrices.
  bool shardable = false;
  std::vector<OptimizerFlag> flags;  ///< its own flags (--NAME-...)
  /// Refuses values of its flags it cannot use (an InputError naming the flag), before a run
  /// touches its directory (nullptr: create checks them).
  std::function<void(const OptimizerOptions& options)> check;
  /// Makes the optimizer; every flag of `flags` is in options.own.
  std::function<std::unique_ptr<torch::optim::Optimizer>(const ModelParameters& params, const OptimizerOptions& options)>
      create;
  std::string source;  ///< who registered it: "lmkit", or a plugin's path (register_optimizer sets it)
};

/// Every optimizer: lmkit's own, then those registered, in --help's order.
const std::vector<OptimizerSpec>& optimizers();
/// Adds an optimizer (from a program or a plugin). Its name must be new and its flags must be
/// spelt --NAME-...: InputError naming the registrant otherwise.
void register_optimizer(OptimizerSpec spec);
/// The optimizer `name`; InputError listing them otherwise.
const OptimizerSpec& optimizer(const std::string& name);
/// "adamw, adafactor, lamb or muon".
std::string optimizer_names();

/// The optimizer options.name names, for `params`; options.own completed from its flags' fallbacks.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ModelParameters& params, OptimizerOptions options);
inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(torch::nn::Module& model, OptimizerOptions options) {
  return make_optimizer(model_parameters(model), std::move(options));
}

/// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// Two groups of `params`: `weight_decay` on matrices and embeddings, none on biases and
/// norm weights (1-D parameters); `options(wd)` makes a group's options.
std::vector<torch::optim::OptimizerParamGroup> decay_groups(
    const std::vector<at::Tensor>& params, double weight_decay,
    const std::function<std::unique_ptr<torch::optim::OptimizerOptions>(double wd)>& options);

class GroupOptions;
/// decay_groups of every parameter in `params`, with GroupOptions(lr, wd): what an optimizer
/// without groups of its own (Adafactor, LAMB, a plugin's) is made with.
std::vector<torch::optim::OptimizerParamGroup> decay_groups(const ModelParameters& params, double lr, double weight_decay);

// ---- State that any optimizer of this kind keeps: named tensors and a step count per parameter.

/// A parameter group's options for the optimizers below: the learning rate, the decoupled
/// weight decay and what the group is for (`role`, e.g. Muon's "matrix" and "adamw").
class GroupOptions : public torch::optim::OptimizerCloneableOptions<GroupOptions> {
 public:
  GroupOptions(double lr = 1e-3, double weight_decay = 0, std::string role = "")  // NOLINT: torch's serialize makes GroupOptions(0)
      : lr_(lr), weight_decay_(weight_decay), role_(std::move(role)) {}
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }
  double weight_decay() const { return weight_decay_; }
  const std::string& role() const { return role_; }
  void serialize(torch::serialize::OutputArchive& archive) const override;
  void serialize(torch::serialize::InputArchive& archive) override;

 private:
  double lr_, weight_decay_;
  std::string role_;
};

/// One parameter's state: its step count and named tensors (moments, factors, buffers).
struct TensorState : public torch::optim::OptimizerCloneableParamState<TensorState> {
  int64_t step = 0;
  std::map<std::string, at::Tensor> tensors;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  void serialize(torch::serialize::InputArchive& archive) override;
};

/// An optimizer whose groups hold GroupOptions and whose parameters hold a TensorState;
/// saves and loads in torch::optim's format (optimizer.pt), so exact resume holds. A subclass
/// says how one parameter is updated; step() runs that for every parameter with a gradient.
class StatefulOptimizer : public torch::optim::Optimizer {
 public:
  using torch::optim::Optimizer::Optimizer;
  at::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 protected:
  /// One parameter's update from its gradient, under its group's options (gradients off).
  virtual void update(at::Tensor& param, const at::Tensor& grad, const GroupOptions& options) = 0;
  /// `p`'s state, made empty on first use (`fresh`: set true then).
  TensorState& state_of(const at::Tensor& p, bool* fresh = nullptr);
  static const GroupOptions& options_of(const torch::optim::OptimizerParamGroup& group);
};

/// One AdamW step of one parameter as torch.optim.AdamW's single-tensor path computes it
/// (Loshchilov & Hutter: decoupled decay, then the bias-corrected Adam update); `state`
/// holds exp_avg and exp_avg_sq, made on first use. Muon's AdamW part and tests use it.
void adamw_update(at::Tensor& param, const at::Tensor& grad, TensorState& state, double lr, double weight_decay,
                  double beta1, double beta2, double eps);

// ---- The apps' flags.

/// --optimizer, --adam-beta1, --adam-beta2, --adam-eps and every registered optimizer's own
/// flags, as lmkit-pretrain and lmkit-finetune offer them.
struct OptimizerFlags {
  std::string name = "adamw";
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::map<std::string, std::string> own;  ///< each optimizer flag's text (its fallback unless given)
};

/// Adds the flags (after plugins are loaded, so theirs are among them).
void add_optimizer_flags(CLI::App& app, OptimizerFlags& flags);
/// The data-parallel flags of lmkit-pretrain and lmkit-finetune.
struct ParallelFlags {
  int shard_optimizer = 0;           ///< --shard-optimizer 0|1|2: ZeRO's stages (train/sharded.h)
  double bucket_mb = 0;              ///< --bucket-mb: the gradient reducer's bucket size in MiB; 0: 25
  bool overlap_param_gather = true;  ///< --[no-]overlap-param-gather: a sharded step's all-gather during the next forward
  bool overlap_given = false;        ///< either spelling was given
};

/// --shard-optimizer, --bucket-mb and --overlap-param-gather / --no-overlap-param-gather.
void add_shard_flag(CLI::App& app, ParallelFlags& flags);

/// The data-parallel flags against the run, checked by the apps before any data is read (and by
/// Trainer): they need data parallelism (`data_parallel`), --[no-]overlap-param-gather a sharded
/// optimizer, and a sharded optimizer must update each element from its own state alone
/// (OptimizerSpec::shardable).
void check_parallel_flags(const ParallelFlags& flags, const std::string& optimizer, bool data_parallel);

/// The chosen optimizer's options: its own flags converted to their types (InputError naming a
/// flag whose text is not one), a flag of another optimizer refused by name
/// ("--adafactor-decay-rate applies to --optimizer adafactor, not adamw").
OptimizerOptions optimizer_options(const CLI::App& app, const OptimizerFlags& flags, double lr, double weight_decay);

}  // namespace lmkit::train
