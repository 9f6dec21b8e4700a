// lmkit-optimizer-replay: applies a registered optimizer to recorded gradients, for
// tests/interop/optimizer_parity.py, which records a small model's real gradients under a
// reference optimizer (HF's Adafactor, torch.optim.Muon, a LAMB written from the paper) and
// compares the parameters after every step.
//
//   lmkit-optimizer-replay OPTIONS.json STEPS.safetensors OUT.safetensors
//
// OPTIONS.json: the OptimizerOptions ({"name", "lr", "weight_decay", "beta1", "beta2", "eps",
// "own"}), "params" (names in the model's order), "tables" (embedding tables), "lrs" (the rate
// of each step; default lr). STEPS.safetensors: "param/NAME" (initial) and "grad/K/NAME" for the
// steps K = 0.. . OUT.safetensors: "param/K/NAME" after step K, and "resumed/K/NAME" from a
// second run that saves the optimizer after the first half of the steps, loads it into a new
// optimizer over copies of the parameters and goes on (exact resume: it must equal "param/K").
#include <ATen/ATen.h>

#include <cstdio>
#include <sstream>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "lmkit/core/app.h"
#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/train/optimizer.h"

using namespace lmkit;

namespace {

struct Replay {
  Json options;
  io::TensorFile steps;
  int64_t count = 0;
};

train::ModelParameters fresh_parameters(const Replay& r) {
  train::ModelParameters params;
  for (const auto& name : r.options.at("params")) {
    const std::string n = name.get<std::string>();
    params.named.emplace_back(n, r.steps.at("param/" + n, "steps").clone().set_requires_grad(true));
  }
  for (const auto& name : r.options.value("tables", Json::array())) params.tables.insert(name.get<std::string>());
  return params;
}

std::unique_ptr<torch::optim::Optimizer> make(const Replay& r, const train::ModelParameters& params) {
  train::OptimizerOptions o;
  o.name = r.options.at("name").get<std::string>();
  o.lr = r.options.value("lr", o.lr);
  o.weight_decay = r.options.value("weight_decay", o.weight_decay);
  o.beta1 = r.options.value("beta1", o.beta1);
  o.beta2 = r.options.value("beta2", o.beta2);
  o.eps = r.options.value("eps", o.eps);
  o.own = r.options.value("own", Json::object());
  return train::make_optimizer(params, o);
}

// Steps [from, to) of the recorded gradients; the parameters after each go to `out` as PREFIX/K/NAME.
void run_steps(const Replay& r, torch::optim::Optimizer& opt, train::ModelParameters& params, int64_t from, int64_t to,
               const std::string& prefix, std::vector<std::pair<std::string, at::Tensor>>& out) {
  for (int64_t k = from; k < to; ++k) {
    const Json lrs = r.options.value("lrs", Json::array());
    if (!lrs.empty()) train::set_learning_rate(opt, lrs.at(k).get<double>());
    for (auto& [name, p] : params.named) p.mutable_grad() = r.steps.at("grad/" + std::to_string(k) + "/" + name, "steps").clone();
    opt.step();
    for (auto& [name, p] : params.named) out.emplace_back(prefix + "/" + std::to_string(k) + "/" + name, p.detach().clone());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: lmkit-optimizer-replay OPTIONS.json STEPS.safetensors OUT.safetensors\n");
    return 2;
  }
  return guard([&] {
    Replay r;
    r.options = load_json_file(argv[1]);
    r.steps = io::read_safetensors(argv[2]);
    while (r.steps.get("grad/" + std::to_string(r.count) + "/" + r.options.at("params").at(0).get<std::string>()).defined()) {
      ++r.count;
    }
    std::vector<std::pair<std::string, at::Tensor>> out;
    auto params = fresh_parameters(r);
    auto opt = make(r, params);
    const int64_t half = r.count / 2;
    run_steps(r, *opt, params, 0, r.count, "param", out);

    // Exact resume: the first half again, the state saved and loaded into a new optimizer.
    auto first = fresh_parameters(r);
    auto first_opt = make(r, first);
    std::vector<std::pair<std::string, at::Tensor>> ignored;
    run_steps(r, *first_opt, first, 0, half, "first", ignored);
    torch::serialize::OutputArchive saved;
    first_opt->save(saved);
    std::ostringstream bytes;
    saved.save_to(bytes);
    auto second = fresh_parameters(r);
    for (size_t i = 0; i < second.named.size(); ++i) second.named[i].second.detach().copy_(first.named[i].second.detach());
    auto second_opt = make(r, second);
    torch::serialize::InputArchive loaded;
    std::istringstream in(bytes.str());
    loaded.load_from(in);
    second_opt->load(loaded);
    run_steps(r, *second_opt, second, half, r.count, "resumed", out);
    io::write_safetensors(argv[3], out);
  });
}
