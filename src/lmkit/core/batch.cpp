#include "lmkit/core/batch.h"

#include <ATen/ATen.h>

namespace lmkit {

Batch Batch::to(const at::Device& device) const {
  auto move = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    // Host to GPU from page-locked memory: the copy is asynchronous and overlaps compute.
    if (device.is_cuda() && t.is_cpu() && !t.is_pinned()) return t.pin_memory().to(device, /*non_blocking=*/true);
    return t.to(device, /*non_blocking=*/true);
  };
  Batch b;
  b.input_ids = move(input_ids);
  b.attention_mask = move(attention_mask);
  b.token_type_ids = move(token_type_ids);
  b.labels = move(labels);
  for (const auto& [name, t] : extra) b.extra.emplace(name, move(t));
  b.decoder_input_ids = move(decoder_input_ids);
  b.decoder_attention_mask = move(decoder_attention_mask);
  return b;
}

int64_t Batch::rows() const {
  if (input_ids.defined()) return input_ids.size(0);
  const at::Tensor images = field(kPixelValues);
  return images.defined() ? images.size(0) : 0;
}

int64_t Batch::num_tokens() const {
  int64_t n = 0;
  if (input_ids.defined()) n += attention_mask.defined() ? attention_mask.sum().item<int64_t>() : input_ids.numel();
  if (decoder_input_ids.defined()) {
    n += decoder_attention_mask.defined() ? decoder_attention_mask.sum().item<int64_t>() : decoder_input_ids.numel();
  }
  return n;
}

at::Tensor Batch::field(const std::string& name) const {
  const auto it = extra.find(name);
  return it == extra.end() ? at::Tensor() : it->second;
}

at::Tensor Output::get(const std::string& name) const {
  for (const auto& [n, t] : named) {
    if (n == name) return t;
  }
  return {};
}

const LossTerm* Output::term(const std::string& name) const {
  for (const auto& t : terms) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace lmkit
