#include "lmkit/models/gpt.h"

#include <ATen/ATen.h>

#include <cmath>

#include "lmkit/models/architectures.h"
#include "lmkit/models/checks.h"
#include "lmkit/models/decoder_heads.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/linear.h"

namespace lmkit::models {

namespace {

// The one table of the classes this family builds.
const ArchitectureTable<GptHead>& gpt_architectures() {
  static const ArchitectureTable<GptHead> table(
      {{"GPT2LMHeadModel", GptHead::kLmHead, kTextToTextHead},
       {"GPT2Model", GptHead::kNone, ""},
       {"GPT2ForSequenceClassification", GptHead::kSequenceClassification, kClassificationHead},
       {"GPT2ForTokenClassification", GptHead::kTokenClassification, kTokenClassificationHead}});
  return table;
}

}  // namespace

GptConfig GptConfig::from_json(const Json& j, const std::string& file) {
  GptConfig c;
  ConfigReader r(j, file);
  ignore_generic_hf_keys(r);
  r.ignore({"decoder_start_token_id", "id2label", "summary_activation", "summary_first_dropout",
            "summary_proj_to_labels", "summary_type", "summary_use_proj", "n_ctx"});
  r.get("vocab_size", c.vocab_size, int64_t{1});
  r.get("n_positions", c.n_positions, int64_t{1});
  r.get("n_embd", c.n_embd, int64_t{1});
  r.get("n_layer", c.n_layer, int64_t{0});
  r.get("n_head", c.n_head, int64_t{1});
  r.get_nullable("n_inner", c.n_inner, c.n_inner, int64_t{1});
  r.get_choice("activation_function", c.activation_function, {"gelu_new", "gelu", "relu", "gelu_pytorch_tanh"});
  r.get("resid_pdrop", c.resid_pdrop, 0.0, 1.0);
  r.get("embd_pdrop", c.embd_pdrop, 0.0, 1.0);
  r.get("attn_pdrop", c.attn_pdrop, 0.0, 1.0);
  r.get("layer_norm_epsilon", c.layer_norm_epsilon, 0.0);
  r.get("initializer_range", c.initializer_range, 0.0);
  r.get_nullable("bos_token_id", c.bos_token_id, int64_t{-1}, int64_t{0});
  r.get_nullable("eos_token_id", c.eos_token_id, int64_t{-1}, int64_t{0});
  r.get_nullable("pad_token_id", c.pad_token_id, int64_t{-1}, int64_t{0});
  r.get("tie_word_embeddings", c.tie_word_embeddings);
  r.get_nullable("classifier_dropout", c.classifier_dropout, 0.1, 0.0, 1.0);
  // Variants lmkit does not implement must be off, not silently ignored.
  bool flag = true;
  r.get("scale_attn_weights", flag);
  if (!flag) throw InputError(file + ": key 'scale_attn_weights' = false is not supported");
  flag = false;
  r.get("scale_attn_by_inverse_layer_idx", flag);
  if (flag) throw InputError(file + ": key 'scale_attn_by_inverse_layer_idx' = true is not supported");
  flag = false;
  r.get("reorder_and_upcast_attn", flag);
  if (flag) throw InputError(file + ": key 'reorder_and_upcast_attn' = true is not supported");
  c.num_labels = read_num_labels(r, c.num_labels);
  r.finish();
  // HF's defaults (50256, GPT-2's <|endoftext|>) are no id of a smaller vocabulary: a
  // config that does not name its own has none, as null would say.
  if (!j.contains("bos_token_id") && c.bos_token_id >= c.vocab_size) c.bos_token_id = -1;
  if (!j.contains("eos_token_id") && c.eos_token_id >= c.vocab_size) c.eos_token_id = -1;
  check_config_token_ids(j, file, c.vocab_size,
                         {{"bos_token_id", c.bos_token_id}, {"eos_token_id", c.eos_token_id}, {"pad_token_id", c.pad_token_id}});
  if (c.n_embd % c.n_head != 0) {
    throw InputError(file + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
  }
  return c;
}

Json GptConfig::to_json() const {
  auto id = [](int64_t v) { return v < 0 ? Json(nullptr) : Json(v); };
  Json j = {{"model_type", "gpt2"},
            {"vocab_size", vocab_size},
            {"n_positions", n_positions},
            {"n_embd", n_embd},
            {"n_layer", n_layer},
            {"n_head", n_head},
            {"activation_function", activation_function},
            {"resid_pdrop", resid_pdrop},
            {"embd_pdrop", embd_pdrop},
            {"attn_pdrop", attn_pdrop},
            {"layer_norm_epsilon", layer_norm_epsilon},
            {"initializer_range", initializer_range},
            {"bos_token_id", id(bos_token_id)},
            {"eos_token_id", id(eos_token_id)},
            {"pad_token_id", id(pad_token_id)},
            {"tie_word_embeddings", tie_word_embeddings},
            {"scale_attn_weights", true}};
  j["n_inner"] = n_inner > 0 ? Json(n_inner) : Json(nullptr);
  if (head == GptHead::kSequenceClassification || head == GptHead::kTokenClassification) write_num_labels(j, num_labels);
  if (head == GptHead::kTokenClassification) j["classifier_dropout"] = classifier_dropout;
  return j;
}

GptImpl::GptImpl(GptConfig config_) : config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.n_embd;
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, d));
  wpe = register_module("wpe", nn::LearnedPositions(c.n_positions, d));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(d, c.n_head, c.inner())
                                               .activation(nn::parse_activation(c.activation_function))
                                               .norm_eps(c.layer_norm_epsilon)
                                               .pre_norm(true)
                                               .dropout(c.resid_pdrop)
                                               .attention_dropout(c.attn_pdrop)
                                               .causal(true)));
  }
  ln_f = register_module("ln_f", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_epsilon)));
  if (c.head == GptHead::kLmHead && !c.tie_word_embeddings) {
    lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(d, c.vocab_size).bias(false)));
  }
  if (c.head == GptHead::kSequenceClassification) {
    score = register_module("score", torch::nn::Linear(torch::nn::LinearOptions(d, c.num_labels).bias(false)));
  }
  if (c.head == GptHead::kTokenClassification) {
    token_classifier = register_module("token_classifier", TokenClassifier(d, c.num_labels, c.classifier_dropout));
  }
  reset_parameters();
}

void GptImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  init_normal(*this, config.initializer_range);
  wpe->weight.normal_(0, config.initializer_range);
  for (auto& p : named_parameters()) {
    if (p.key().find("norm.weight") != std::string::npos || p.key().find("ln_f.weight") != std::string::npos) p.value().fill_(1);
    if (p.key().find("norm.bias") != std::string::npos || p.key().find("ln_f.bias") != std::string::npos) p.value().zero_();
  }
  // Radford et al. 2019: residual projections scaled by 1/sqrt(2 · n_layer).
  const double std_resid = config.initializer_range / std::sqrt(2.0 * std::max<int64_t>(1, config.n_layer));
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    layer->self_attn->out->weight.normal_(0, std_resid);
    layer->ffn->out->weight.normal_(0, std_resid);
  }
}

std::string GptImpl::architecture() const { return gpt_architectures().name(config.head); }

at::Tensor GptImpl::decode(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                           std::vector<nn::LayerCache>* caches, std::vector<at::Tensor>* hidden_states) {
  const int64_t t = input_ids.size(1);
  const int64_t past = caches && !caches->empty() ? (*caches)[0].self_attn.length() : 0;
  // HF forward(): position_ids = arange(past, past + T), whatever the padding.
  at::Tensor x = wte(input_ids) + wpe(t, past);  // (B, T, D)
  if (is_training() && config.embd_pdrop > 0) x = nn::dropout(x, config.embd_pdrop, true);
  if (hidden_states) hidden_states->push_back(x);
  // attention_mask, when given, covers past + new positions (B, past + T).
  // Without padding, the layers mask future keys in the kernel (flash attention on a GPU).
  at::Tensor bias = nn::attention_bias(attention_mask, true, t, past + t, x.scalar_type(), x.device(), true);
  x = run_layers(layers, x, bias, {}, {}, caches, hidden_states);
  x = ln_f(x);  // (B, T, D)
  if (hidden_states) hidden_states->back() = x;  // HF: the last entry is after ln_f
  return x;
}

at::Tensor GptImpl::lm_logits(const at::Tensor& hidden) {
  return nn::linear(hidden, lm_head ? lm_head->weight : wte->weight);  // (..., V)
}

Output GptImpl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  out.last_hidden_state = decode(batch.input_ids, batch.attention_mask, nullptr, hs);  // (B, T, D)
  const bool lm = config.head == GptHead::kLmHead;
  apply_decoder_head(out, batch, lm ? (lm_head ? lm_head->weight : wte->weight) : at::Tensor(), full_logits, score, token_classifier);
  return out;
}

GenerationSpec GptImpl::generation_spec() const {
  return {false, config.bos_token_id, config.eos_token_id, config.vocab_size, config.n_positions};
}

std::unique_ptr<DecodingSession> GptImpl::start_decoding(const at::Tensor&, const at::Tensor&, bool use_cache) {
  if (config.head != GptHead::kLmHead) return Model::start_decoding({}, {}, use_cache);
  return decoder_only_session(*this, use_cache);
}

void GptImpl::check_batch(const Batch& b) const {
  check_decoder_batch(b, architecture(), config.vocab_size, static_cast<bool>(token_classifier),
                      config.head == GptHead::kSequenceClassification, config.num_labels);
}

std::vector<HfTensor> GptImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = config.head == GptHead::kNone ? "" : "transformer.";  // HF's GPT2Model has no prefix
  t.push_back({b + "wte.weight", wte->weight});
  t.push_back({b + "wpe.weight", wpe->weight});
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = b + "h." + std::to_string(i) + ".";
    // Conv1D: weight stored (in, out); c_attn's columns are [q | k | v], matching qkv's rows.
    add_linear(t, p + "attn.c_attn", layer->self_attn->qkv, /*transpose=*/true);
    add_linear(t, p + "attn.c_proj", layer->self_attn->out, true);
    add_norm(t, p + "ln_1", layer->self_attn_norm);
    add_linear(t, p + "mlp.c_fc", layer->ffn->in, true);
    add_linear(t, p + "mlp.c_proj", layer->ffn->out, true);
    add_norm(t, p + "ln_2", layer->ffn_norm);
  }
  add_norm(t, b + "ln_f", ln_f);
  if (lm_head) t.push_back({"lm_head.weight", lm_head->weight});
  if (score) t.push_back({"score.weight", score->weight});
  if (token_classifier) token_classifier->add_hf_tensors(t);
  return t;
}

bool GptImpl::hf_ignorable(const std::string& name) const {
  // Tied lm_head, and the causal-mask buffers of older checkpoints.
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return (name == "lm_head.weight" && !lm_head) || ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

Family gpt_family() {
  Family f;
  f.model_type = "gpt2";
  f.architectures = gpt_architectures().names();
  f.heads = gpt_architectures().heads();
  f.objectives = {{"clm", "GPT2LMHeadModel"}};
  f.tokenizer_family = "gpt2";
  f.positions_key = "n_positions";
  f.metrics = {"perplexity"};
  f.create = [](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<Model> {
    GptConfig c = GptConfig::from_json(config, file);
    c.head = gpt_architectures().head(arch);
    return std::make_shared<GptImpl>(c);
  };
  f.adopt_vocabulary = [](Json& config, int64_t vocab_size, int32_t, int32_t eos) {
    config["vocab_size"] = vocab_size;
    config["bos_token_id"] = config["eos_token_id"] = eos;  // GPT-2's <|endoftext|> is both
  };
  return f;
}

}  // namespace lmkit::models
