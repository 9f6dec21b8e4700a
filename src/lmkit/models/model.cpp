#include "lmkit/models/model.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/models/family.h"
#include "lmkit/nn/fused.h"
#include "lmkit/nn/layer_gate.h"
#include "lmkit/nn/norm.h"
#include "lmkit/nn/recompute.h"

namespace lmkit::models {

namespace {

class StandardSession : public DecodingSession {
 public:
  StandardSession(DecodeFn decode, std::function<at::Tensor(const at::Tensor&)> head, at::Tensor memory,
                  at::Tensor memory_mask, bool use_cache)
      : decode_(std::move(decode)), head_(std::move(head)), memory_(std::move(memory)),
        memory_mask_(std::move(memory_mask)), use_cache_(use_cache) {}

  at::Tensor step(const at::Tensor& tokens) override { return head_(append(tokens).select(1, -1)); }  // (B, V)

  at::Tensor step_all(const at::Tensor& tokens) override {
    const at::Tensor hidden = append(tokens);
    return head_(hidden.slice(1, hidden.size(1) - tokens.size(1)));  // (B, n, V)
  }

  void select(const at::Tensor& index) override {
    auto pick = [&](at::Tensor& t) {
      if (t.defined()) t = t.index_select(0, index);
    };
    pick(memory_), pick(memory_mask_), pick(history_);
    for (auto& c : caches_) {
      pick(c.self_attn.key), pick(c.self_attn.value), pick(c.cross_attn.key), pick(c.cross_attn.value);
    }
  }

 private:
  // The hidden states of the new positions (B, n, D), or with no cache of the whole sequence (B, T, D).
  at::Tensor append(const at::Tensor& tokens) {
    if (use_cache_) return decode_(tokens, &caches_, memory_, memory_mask_);
    history_ = history_.defined() ? at::cat({history_, tokens}, 1) : tokens;
    return decode_(history_, nullptr, memory_, memory_mask_);
  }

  DecodeFn decode_;
  std::function<at::Tensor(const at::Tensor&)> head_;
  at::Tensor memory_, memory_mask_, history_;
  std::vector<nn::LayerCache> caches_;
  bool use_cache_;
};

}  // namespace

Packing Packing::of(const Batch& batch) { return {batch.field(kDocumentIds), batch.field(kPositionIds)}; }

std::unique_ptr<DecodingSession> make_decoding_session(DecodeFn decode, std::function<at::Tensor(const at::Tensor&)> head,
                                                       at::Tensor memory, at::Tensor memory_mask, bool use_cache) {
  return std::make_unique<StandardSession>(std::move(decode), std::move(head), std::move(memory), std::move(memory_mask),
                                           use_cache);
}

std::unique_ptr<DecodingSession> Model::start_decoding(const at::Tensor&, const at::Tensor&, bool) {
  throw InputError(architecture() + " cannot generate text (it has no language-model head)");
}

std::vector<std::pair<std::string, int64_t>> Model::loss_targets(const Batch& batch) const {
  return {{"loss", count_targets(*this, batch)}};
}

double layer_flops_per_token(const torch::nn::ModuleList& layers, int64_t keys) {
  double flops = 0;
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const auto own = layer->self_attn->kernel().parameter_names();  // counted by the kernel
    for (const auto& p : layer->named_parameters()) {
      const std::string prefix = "self_attn.";
      const bool kernel = p.key().rfind(prefix, 0) == 0 &&
                          std::find(own.begin(), own.end(), p.key().substr(prefix.size())) != own.end();
      if (p.value().dim() == 2 && !kernel) flops += 2.0 * static_cast<double>(p.value().numel());
    }
    flops += layer->self_attn->kernel().flops_per_token(keys);
    const double inner = static_cast<double>(layer->self_attn->inner_dim());
    if (layer->cross_attn) flops += 4.0 * static_cast<double>(keys) * inner;  // cross-attention (S ≈ T here)
  }
  return flops;
}

double encoder_decoder_flops_per_token(const torch::nn::Module& model, int64_t d_model, int64_t inner,
                                       int64_t encoder_layers, int64_t decoder_layers, int64_t vocab,
                                       int64_t seq_len, int64_t target_len) {
  double enc = 0, dec = 0;
  for (const auto& p : model.named_parameters()) {
    const std::string& key = p.key();
    if (p.value().dim() != 2 || key.find("embed") != std::string::npos || key == "shared.weight") continue;
    if (key.find("relative_bias") != std::string::npos || key.find("lm_head") != std::string::npos) continue;
    (key.find("decoder") != std::string::npos ? dec : enc) += 2.0 * static_cast<double>(p.value().numel());
  }
  const double t = static_cast<double>(seq_len), s = static_cast<double>(target_len), h = static_cast<double>(inner);
  const double encoder = enc + 4.0 * t * h * static_cast<double>(encoder_layers);
  const double decoder = dec + 4.0 * (s + t) * h * static_cast<double>(decoder_layers) +
                         2.0 * static_cast<double>(d_model) * static_cast<double>(vocab);
  return encoder + decoder * s / t;  // the decoder's tokens, per encoder token
}

at::Tensor shift_right(const at::Tensor& labels, int64_t decoder_start_token_id, int64_t pad_token_id) {
  at::Tensor shifted = at::full_like(labels, decoder_start_token_id);
  shifted.slice(1, 1).copy_(labels.slice(1, 0, -1));
  return shifted.masked_fill(shifted.eq(-100), pad_token_id);
}

at::Tensor run_layers(torch::nn::ModuleList& layers, at::Tensor x, const nn::AttentionMask& self_mask, const at::Tensor& memory,
                      const at::Tensor& cross_bias, std::vector<nn::LayerCache>* caches,
                      std::vector<at::Tensor>* hidden_states, nn::Norm* final_norm) {
  if (caches && caches->size() < layers->size()) caches->resize(layers->size());
  const bool recompute = nn::recompute_layers() && caches == nullptr;
  // Pre-norm layers on the fused path hand their last residual sum on unmade: the next layer's
  // first norm (or final_norm) makes it in the same kernel. Not where each layer's output is
  // asked for, nor recomputed (a recomputed block returns one tensor).
  if (!layers->is_empty() && layers->ptr<nn::TransformerLayerImpl>(0)->options.pre_norm() && !recompute &&
      hidden_states == nullptr && nn::defers_residual_sums(x)) {
    nn::PendingSum r{x, {}, 0.0};
    for (size_t i = 0; i < layers->size(); ++i) {
      auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
      nn::before_layer(*layer);
      r = layer->forward_pending(r, self_mask, memory, cross_bias, caches ? &(*caches)[i] : nullptr);
    }
    return final_norm ? nn::residual_norm(r, *final_norm).second : r.sum();
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    nn::before_layer(*layer);  // a sharded optimizer's parameter all-gather may still be arriving
    if (recompute) {
      std::vector<at::Tensor> in = {x, memory, cross_bias};
      for (const at::Tensor& part : self_mask.parts()) in.push_back(part);
      std::vector<at::Tensor> shared;  // tensors the stack's layers share (Linformer's layerwise projection)
      if (layer->options.shared()) {
        for (const auto& [name, t] : *layer->options.shared()) shared.push_back(t);
      }
      x = nn::recompute([layer](const std::vector<at::Tensor>& v) {
            return layer->forward(v[0], nn::AttentionMask::from_parts(v, 3), v[1], v[2], nullptr);
          }, in, nn::block_parameters(*layer, shared));
    } else {
      x = layer->forward(x, self_mask, memory, cross_bias, caches ? &(*caches)[i] : nullptr);
    }
    if (hidden_states) hidden_states->push_back(x);
  }
  return final_norm ? (*final_norm)(x) : x;
}

namespace {
thread_local bool skip_initialisation = false;
}  // namespace

bool initialise_weights() { return !skip_initialisation; }

SkipWeightInit::SkipWeightInit(bool on) : previous_(skip_initialisation) {
  skip_initialisation = previous_ || on;
}

SkipWeightInit::~SkipWeightInit() { skip_initialisation = previous_; }

void init_normal(torch::nn::Module& module, double std) {
  at::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {  // callable from constructors
    if (auto* linear = child->as<torch::nn::LinearImpl>()) {
      linear->weight.normal_(0, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = child->as<torch::nn::EmbeddingImpl>()) {
      embedding->weight.normal_(0, std);
    }
  }
}

void reset_norms(torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {
    if (auto* norm = child->as<nn::NormImpl>()) {
      norm->weight.fill_(1);
      if (norm->bias.defined()) norm->bias.zero_();
    }
  }
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace lmkit::models
