#include "lmkit/train/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>

#include <CLI/CLI.hpp>
#include <torch/nn/modules/embedding.h>
#include <torch/optim/serialize.h>

#include "lmkit/core/app.h"
#include "lmkit/core/error.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/nn/position.h"
#include "lmkit/train/optimizers_builtin.h"
#include "lmkit/train/sharded.h"

namespace lmkit::train {

namespace {

std::vector<OptimizerSpec>& registry() {
  static std::vector<OptimizerSpec> all = [] {
    std::vector<OptimizerSpec> builtin = {adamw_optimizer(), adafactor_optimizer(), lamb_optimizer(), muon_optimizer()};
    for (auto& o : builtin) o.source = "lmkit";
    return builtin;
  }();
  return all;
}

// A flag's text as --help shows its default: 0.9, -0.8, 1e-30, true, original.
std::string flag_text(const Json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// The text given for an optimizer flag, as the type of its fallback.
Json flag_value(const OptimizerFlag& f, const std::string& text) {
  const std::string said = "--" + f.name + " '" + text + "'";
  if (f.fallback.is_boolean()) {
    if (text == "true" || text == "1") return true;
    if (text == "false" || text == "0") return false;
    throw InputError(said + ": expected true or false");
  }
  if (f.fallback.is_number()) {
    size_t used = 0;
    double value = NAN;
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check_input(used == text.size() && !text.empty() && std::isfinite(value), said + ": expected a number");
    return value;
  }
  check_input(f.choices.empty() || std::find(f.choices.begin(), f.choices.end(), text) != f.choices.end(),
              said + ": expected " + join_names(f.choices, " or "));
  return text;
}

// "adamw, lamb or muon": the optimizers --adam-beta1 and its kin apply to.
std::string adam_users() {
  std::vector<std::string> names;
  for (const auto& o : optimizers()) {
    if (o.adam_flags) names.push_back(o.name);
  }
  return join_names(names, " or ");
}

}  // namespace

ModelParameters model_parameters(torch::nn::Module& model) {
  ModelParameters out;
  for (const auto& p : model.named_parameters()) {
    if (p.value().requires_grad()) out.named.emplace_back(p.key(), p.value());
  }
  for (const auto& m : model.named_modules()) {
    if (!m.value()->as<torch::nn::EmbeddingImpl>() && !m.value()->as<nn::PositionTableImpl>()) continue;
    out.tables.insert(m.key().empty() ? "weight" : m.key() + ".weight");
  }
  return out;
}

const std::vector<OptimizerSpec>& optimizers() { return registry(); }

void register_optimizer(OptimizerSpec spec) {
  check_input(!spec.name.empty() && spec.create != nullptr, registering_source() + ": an optimizer needs a name and create");
  for (const auto& o : registry()) {
    check_input(o.name != spec.name, "optimizer '" + spec.name + "' is registered twice: by " + o.source + " and by " +
                                         registering_source());
  }
  for (const auto& f : spec.flags) {
    check_input(f.name.rfind(spec.name + "-", 0) == 0, registering_source() + ": optimizer '" + spec.name + "': its flag --" +
                                                           f.name + " must be spelt --" + spec.name + "-...");
    check_input(f.fallback.is_boolean() || f.fallback.is_number() || f.fallback.is_string(),
                registering_source() + ": optimizer flag --" + f.name + ": its fallback must be a number, boolean or string");
  }
  spec.source = registering_source();
  registry().push_back(std::move(spec));
}

const OptimizerSpec& optimizer(const std::string& name) {
  for (const auto& o : optimizers()) {
    if (o.name == name) return o;
  }
  throw InputError("unknown optimizer '" + name + "' (expected " + optimizer_names() + ")");
}

std::string optimizer_names() {
  std::vector<std::string> names;
  for (const auto& o : optimizers()) names.push_back(o.name);
  return join_names(names, " or ");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ModelParameters& params, OptimizerOptions options) {
  const OptimizerSpec& spec = optimizer(options.name);
  for (const auto& f : spec.flags) {
    if (!options.own.contains(f.name)) options.own[f.name] = f.fallback;
  }
  auto made = call_registered(spec.source, "optimizer '" + spec.name + "': create", [&] { return spec.create(params, options); });
  if (!made) throw RuntimeError(spec.source + ": optimizer '" + spec.name + "': create returned no optimizer");
  return made;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(&optimizer)) return set_learning_rate(sharded->inner(), lr);
  // Any optimizer's options (not only AdamW's) take a learning rate through set_lr.
  for (auto& g : optimizer.param_groups()) g.options().set_lr(lr);
}

std::vector<torch::optim::OptimizerParamGroup> decay_groups(
    const std::vector<at::Tensor>& params, double weight_decay,
    const std::function<std::unique_ptr<torch::optim::OptimizerOptions>(double wd)>& options) {
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return groups;
}

std::vector<torch::optim::OptimizerParamGroup> decay_groups(const ModelParameters& params, double lr, double weight_decay) {
  std::vector<at::Tensor> all;
  for (const auto& [name, p] : params.named) all.push_back(p);
  return decay_groups(all, weight_decay, [&](double wd) { return std::make_unique<GroupOptions>(lr, wd); });
}

// ---- GroupOptions, TensorState, StatefulOptimizer

void GroupOptions::serialize(torch::serialize::OutputArchive& archive) const {
  archive.write("lr", c10::IValue(lr_));
  archive.write("weight_decay", c10::IValue(weight_decay_));
  archive.write("role", c10::IValue(role_));
}

namespace {
c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value;
}
}  // namespace

void GroupOptions::serialize(torch::serialize::InputArchive& archive) {
  lr_ = read_value(archive, "lr").toDouble();
  weight_decay_ = read_value(archive, "weight_decay").toDouble();
  role_ = read_value(archive, "role").toStringRef();
}

void TensorState::serialize(torch::serialize::OutputArchive& archive) const {
  archive.write("step", c10::IValue(step));
  c10::List<std::string> names;
  for (const auto& [name, t] : tensors) {
    names.push_back(name);
    archive.write("tensor/" + name, t, /*is_buffer=*/true);
  }
  archive.write("names", c10::IValue(names));
}

void TensorState::serialize(torch::serialize::InputArchive& archive) {
  step = read_value(archive, "step").toInt();
  tensors.clear();
  for (const auto& name : read_value(archive, "names").toListRef()) {
    at::Tensor t;
    archive.read("tensor/" + name.toStringRef(), t, /*is_buffer=*/true);
    tensors[name.toStringRef()] = t;
  }
}

at::Tensor StatefulOptimizer::step(LossClosure closure) {
  check_input(!closure, "lmkit's optimizers take no closure");
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const GroupOptions& o = options_of(group);
    for (auto& p : group.params()) {
      if (p.grad().defined()) update(p, p.grad(), o);
    }
  }
  return {};
}

void StatefulOptimizer::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<TensorState, GroupOptions>(archive, *this);
}

void StatefulOptimizer::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<TensorState, GroupOptions>(archive, *this);
}

TensorState& StatefulOptimizer::state_of(const at::Tensor& p, bool* fresh) {
  auto it = state_.find(p.unsafeGetTensorImpl());
  if (fresh) *fresh = it == state_.end();
  if (it == state_.end()) it = state_.emplace(p.unsafeGetTensorImpl(), std::make_unique<TensorState>()).first;
  return static_cast<TensorState&>(*it->second);
}

const GroupOptions& StatefulOptimizer::options_of(const torch::optim::OptimizerParamGroup& group) {
  return static_cast<const GroupOptions&>(group.options());
}

void adamw_update(at::Tensor& param, const at::Tensor& grad, TensorState& state, double lr, double weight_decay,
                  double beta1, double beta2, double eps) {
  at::Tensor& m = state.tensors["exp_avg"];
  at::Tensor& v = state.tensors["exp_avg_sq"];
  if (!m.defined()) m = at::zeros_like(param, at::MemoryFormat::Preserve);
  if (!v.defined()) v = at::zeros_like(param, at::MemoryFormat::Preserve);
  state.step += 1;
  param.mul_(1 - lr * weight_decay);
  m.lerp_(grad, 1 - beta1);
  v.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const double correction1 = 1 - std::pow(beta1, static_cast<double>(state.step));
  const double correction2 = 1 - std::pow(beta2, static_cast<double>(state.step));
  const at::Tensor denom = (v.sqrt() / std::sqrt(correction2)).add_(eps);
  param.addcdiv_(m, denom, -lr / correction1);
}

// ---- The apps' flags

void add_optimizer_flags(CLI::App& app, OptimizerFlags& flags) {
  app.add_option("--optimizer", flags.name, "the optimizer: " + optimizer_names());
  app.add_option("--adam-beta1", flags.beta1, "Adam's beta1 (--optimizer " + adam_users() + ")")
      ->check(in_range_below(0, 1));
  app.add_option("--adam-beta2", flags.beta2, "Adam's beta2 (0.95 is common for decoders; --optimizer " + adam_users() + ")")
      ->check(in_range_below(0, 1));
  app.add_option("--adam-eps", flags.eps, "Adam's epsilon (--optimizer " + adam_users() + ")")
      ->check(positive());
  for (const auto& o : optimizers()) {
    for (const auto& f : o.flags) {
      flags.own[f.name] = flag_text(f.fallback);
      const std::string type = f.fallback.is_boolean()           ? "BOOL"
                               : f.fallback.is_number_integer() ? "INT"
                               : f.fallback.is_number()         ? "FLOAT"
                                                                : "TEXT";
      app.add_option("--" + f.name, flags.own[f.name], f.help + " (--optimizer " + o.name + ")")->type_name(type);
    }
  }
}

void add_shard_flag(CLI::App& app, ParallelFlags& flags) {
  app.add_option("--shard-optimizer", flags.shard_optimizer,
                 "with several processes: 1 shards the optimizer state across the ranks (ZeRO-1), 2 the gradients "
                 "too (ZeRO-2); 0 keeps both whole on every rank")
      ->check(in_range(0, 2));
  app.add_option("--bucket-mb", flags.bucket_mb,
                 "with several processes: gradients are reduced in buckets of about this many MiB, each launched as "
                 "soon as backward fills it (DDP's bucket_cap_mb; default 25); stage 2 holds two at a time")
      ->check(in_range(1.0 / 1024, 65536.0));
  app.add_flag("--overlap-param-gather,!--no-overlap-param-gather", flags.overlap_param_gather,
               "--shard-optimizer: each layer of the next forward waits only for its own parameters' all-gather "
               "(default: on; Megatron-LM's --overlap-param-gather)")
      ->each([&flags](const std::string&) { flags.overlap_given = true; });
}

void check_parallel_flags(const ParallelFlags& flags, const std::string& optimizer_name, bool data_parallel) {
  const int shard_optimizer = flags.shard_optimizer;
  const double bucket_mb = flags.bucket_mb;
  check_input(shard_optimizer >= 0 && shard_optimizer <= 2, "--shard-optimizer must be 0, 1 or 2");
  check_input(shard_optimizer == 0 || data_parallel, "--shard-optimizer " + std::to_string(shard_optimizer) +
                                                         " shards across data-parallel ranks: start the run with torchrun, "
                                                         "srun or mpirun (docs/distributed.md)");
  check_input(bucket_mb == 0 || data_parallel, "--bucket-mb sizes the gradient buckets of data parallelism: start the run "
                                               "with torchrun, srun or mpirun (docs/distributed.md)");
  check_input(!flags.overlap_given || shard_optimizer > 0,
              "--[no-]overlap-param-gather applies to a sharded optimizer's all-gather: give it with "
              "--shard-optimizer 1 or 2");
  check_input(shard_optimizer == 0 || optimizer(optimizer_name).shardable,
              "--shard-optimizer: --optimizer " + optimizer_name + " cannot be sharded: its update of an element reads "
              "more than that element's own state and gradient (docs/distributed.md, \"Sharded optimizer state\")");
}

OptimizerOptions optimizer_options(const CLI::App& app, const OptimizerFlags& flags, double lr, double weight_decay) {
  const OptimizerSpec& chosen = optimizer(flags.name);
  OptimizerOptions o;
  o.name = chosen.name;
  o.lr = lr;
  o.weight_decay = weight_decay;
  o.beta1 = flags.beta1;
  o.beta2 = flags.beta2;
  o.eps = flags.eps;
  for (const char* adam : {"--adam-beta1", "--adam-beta2", "--adam-eps"}) {
    check_input(chosen.adam_flags || app.count(adam) == 0,
                std::string(adam) + " applies to --optimizer " + adam_users() + ", not " + chosen.name);
  }
  for (const auto& other : optimizers()) {
    for (const auto& f : other.flags) {
      if (other.name != chosen.name) {
        check_input(app.count("--" + f.name) == 0,
                    "--" + f.name + " applies to --optimizer " + other.name + ", not " + chosen.name);
        continue;
      }
      o.own[f.name] = flag_value(f, flags.own.at(f.name));
    }
  }
  if (chosen.check) call_registered(chosen.source, "optimizer '" + chosen.name + "': check", [&] { chosen.check(o); });
  return o;
}

}  // namespace lmkit::train
