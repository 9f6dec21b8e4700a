#include "lmkit/nn/layer_gate.h"

#include <torch/nn/module.h>

namespace lmkit::nn {

namespace {
thread_local LayerGate* current = nullptr;  // the forward runs on the thread that installed it
}  // namespace

std::vector<const torch::nn::Module*> gated_layers(const torch::nn::Module& model) {
  std::vector<const torch::nn::Module*> out;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (dynamic_cast<const GatedLayer*>(module.get())) out.push_back(module.get());
  }
  return out;
}

void before_layer(const torch::nn::Module& layer) {
  if (current) current->before_layer(layer);
}

LayerGateScope::LayerGateScope(LayerGate* gate) : before_(current) { current = gate; }

LayerGateScope::~LayerGateScope() { current = before_; }

}  // namespace lmkit::nn
