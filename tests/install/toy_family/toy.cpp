// The "toy" family: token embeddings and an output layer over them, trained with lmkit's
// masked-LM objective. Small on purpose: the install test's plugin family.
// Narrow LibTorch headers (the modules and the loss it uses): <torch/torch.h> compiles far more.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"

namespace {

using lmkit::Json;

class ToyImpl : public lmkit::models::Model {
 public:
  explicit ToyImpl(const Json& c) : vocab_(c.value("vocab_size", int64_t{1000})), dim_(c.value("hidden_size", int64_t{16})) {
    lmkit::check_input(vocab_ > 0 && dim_ > 0, "toy: vocab_size and hidden_size must be positive");
    embed_ = register_module("embed", torch::nn::Embedding(vocab_, dim_));
    head_ = register_module("head", torch::nn::Linear(dim_, vocab_));
  }
  lmkit::Output forward(const lmkit::Batch& b) override {
    lmkit::Output out;
    out.logits = head_(embed_(b.input_ids));
    if (b.labels.defined()) {
      namespace F = torch::nn::functional;
      out.loss = F::cross_entropy(out.logits.view({-1, vocab_}), b.labels.reshape(-1), F::CrossEntropyFuncOptions().ignore_index(-100));
    }
    return out;
  }
  std::string model_type() const override { return "toy"; }
  std::string architecture() const override { return "ToyForMaskedLM"; }
  Json config_json() const override { return {{"model_type", "toy"}, {"vocab_size", vocab_}, {"hidden_size", dim_}}; }
  std::vector<lmkit::models::HfTensor> hf_tensors() override {
    return {{"embed.weight", embed_->weight}, {"head.weight", head_->weight}, {"head.bias", head_->bias}};
  }
  int64_t vocab_size() const override { return vocab_; }
  double flops_per_token(int64_t, int64_t) const override { return 2.0 * static_cast<double>(dim_ * vocab_); }
  void check_batch(const lmkit::Batch& b) const override {
    lmkit::check_input(b.input_ids.defined() && b.input_ids.max().item<int64_t>() < vocab_, "toy: input ids outside the vocabulary");
  }

 private:
  int64_t vocab_, dim_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::Linear head_{nullptr};
};

void register_toy() {
  lmkit::models::Family f;
  f.model_type = "toy";
  f.summary = "a toy masked LM (the install test's family)";
  f.architectures = {"ToyForMaskedLM"};
  f.objectives = {{"mlm", "ToyForMaskedLM"}};
  f.tokenizer_family = "bert";
  f.create = [](const Json& config, const std::string&, const std::string&) -> std::shared_ptr<lmkit::models::Model> {
    return std::make_shared<ToyImpl>(config);
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t) { config["vocab_size"] = vocab_size; };
  lmkit::models::register_family(std::move(f));
}

}  // namespace

LMKIT_PLUGIN(register_toy)
