#include "lmkit/models/token_classifier.h"

#include <ATen/ATen.h>

#include "lmkit/models/checks.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::models {

TokenClassifierImpl::TokenClassifierImpl(int64_t hidden_size, int64_t num_labels, double p) : dropout(p) {
  linear = register_module("linear", torch::nn::Linear(hidden_size, num_labels));
}

void TokenClassifierImpl::apply(Output& out, const at::Tensor& hidden, const at::Tensor& labels) {
  const at::Tensor x = is_training() && dropout > 0 ? nn::dropout(hidden, dropout, true) : hidden;
  out.logits = linear(x);  // (B, T, num_labels)
  if (labels.defined()) out.loss = cross_entropy(out.logits, labels);
}

void TokenClassifierImpl::add_hf_tensors(std::vector<HfTensor>& out, const std::string& name) { add_linear(out, name, linear); }

void check_token_labels(const Batch& b, int64_t num_labels) {
  check_same_shape(b.labels, b.input_ids, "labels", "input_ids");
  check_labels(b.labels, num_labels, "labels");
}

}  // namespace lmkit::models
