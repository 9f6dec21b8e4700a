#include "lmkit/models/question_answering.h"

#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/nn/dropout.h"

namespace lmkit::models {

QuestionAnsweringHeadImpl::QuestionAnsweringHeadImpl(const QuestionAnsweringOptions& o) : options(o) {
  const int64_t d = o.hidden_size;
  if (o.intermediate_size > 0) {
    intermediate = register_module("intermediate", torch::nn::Linear(d, o.intermediate_size));
    output = register_module("output", torch::nn::Linear(o.intermediate_size, d));
    norm = register_module("norm", nn::Norm(nn::NormOptions(d).eps(o.layer_norm_eps)));
  }
  qa_outputs = register_module("qa_outputs", torch::nn::Linear(d, 2));
}

void QuestionAnsweringHeadImpl::apply(Output& out, const at::Tensor& hidden, const at::Tensor& question,
                                      const at::Tensor& start, const at::Tensor& end) {
  at::Tensor h = hidden;
  if (intermediate) {
    const bool drop = is_training() && options.dropout > 0;
    const at::Tensor x = drop ? nn::dropout(hidden, options.dropout, true) : hidden;
    at::Tensor y = output(nn::activate(intermediate(x), options.activation));
    if (drop) y = nn::dropout(y, options.dropout, true);
    h = norm(y + hidden);  // BigBirdOutput's residual: the encoder's output, before the head's dropout
  }
  at::Tensor logits = qa_outputs(h);  // (B, T, 2)
  if (question.defined()) logits = logits - question.unsqueeze(2).to(logits.scalar_type()) * 1e6;
  out.logits = logits;
  const at::Tensor start_logits = logits.select(2, 0).contiguous(), end_logits = logits.select(2, 1).contiguous();
  out.named.emplace_back("start_logits", start_logits);
  out.named.emplace_back("end_logits", end_logits);
  if (!start.defined()) return;
  // HF: positions past the row are clamped to T, and T is ignored.
  const int64_t t = start_logits.size(1);
  auto loss = [&](const at::Tensor& logit, const at::Tensor& target) {
    return at::cross_entropy_loss(logit.to(at::kFloat), target.clamp(0, t), {}, at::Reduction::Mean, t);
  };
  out.loss = (loss(start_logits, start) + loss(end_logits, end)) / 2;
}

void QuestionAnsweringHeadImpl::add_hf_tensors(std::vector<HfTensor>& out) {
  if (!intermediate) {
    add_linear(out, "qa_outputs", qa_outputs);
    return;
  }
  add_linear(out, "qa_classifier.intermediate.dense", intermediate);
  add_linear(out, "qa_classifier.output.dense", output);
  add_norm(out, "qa_classifier.output.LayerNorm", norm);
  add_linear(out, "qa_classifier.qa_outputs", qa_outputs);
}

double QuestionAnsweringHeadImpl::flops_per_token() const {
  const double d = static_cast<double>(options.hidden_size);
  return 2.0 * (2.0 * d + 2.0 * d * static_cast<double>(options.intermediate_size));
}

void check_answer_positions(const Batch& b) {
  const at::Tensor start = b.field(kStartPositions), end = b.field(kEndPositions);
  if (!start.defined() && !end.defined()) return;
  check_input(start.defined() && end.defined(), std::string("question answering takes ") + kStartPositions + " and " +
                                                    kEndPositions + " together; only " +
                                                    (start.defined() ? kStartPositions : kEndPositions) + " was given");
  const int64_t rows = b.input_ids.size(0);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{kStartPositions, start}, {kEndPositions, end}}) {
    check_input(t.dim() == 1 && t.size(0) == rows && !at::isFloatingType(t.scalar_type()) && t.scalar_type() != at::kBool,
                std::string(name) + " must be (" + std::to_string(rows) + ") integers, one a row");
    check_input(t.numel() == 0 || t.min().item<int64_t>() >= 0, std::string(name) + " holds a negative position");
  }
}

at::Tensor question_tokens(const at::Tensor& input_ids, int64_t sep) {
  const at::Tensor length = input_ids.eq(sep).to(at::kInt).argmax(-1, /*keepdim=*/true) + 1;  // (B, 1)
  return at::arange(input_ids.size(1), input_ids.options().dtype(at::kLong)).unsqueeze(0).lt(length).to(at::kLong);
}

at::Tensor question_global_attention(const at::Tensor& input_ids, int64_t sep) {
  const at::Tensor is_sep = input_ids.eq(sep);
  check_input(sep >= 0 && is_sep.any(1).all().item<bool>(),
              "question answering with Longformer: a row holds no separator (sep_token_id " + std::to_string(sep) +
                  ") after its question; give global_attention_mask");
  const at::Tensor end = is_sep.to(at::kInt).argmax(-1, /*keepdim=*/true);  // the first separator
  return at::arange(input_ids.size(1), input_ids.options().dtype(at::kLong)).unsqueeze(0).lt(end).to(at::kLong);
}

}  // namespace lmkit::models
