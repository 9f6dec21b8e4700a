#include "lmkit/models/vit.h"

#include <ATen/ATen.h>

#include <cctype>
#include <cmath>

#include "lmkit/models/checks.h"
#include "lmkit/models/family.h"
#include "lmkit/models/hf_names.h"
#include "lmkit/models/losses.h"
#include "lmkit/nn/attention_kernel.h"
#include "lmkit/nn/dropout.h"
#include "lmkit/nn/transformer_layer.h"

namespace lmkit::models {

const ArchitectureTable<VitHead>& vit_architectures(const std::string& model_type) {
  static const ArchitectureTable<VitHead> vit({{"ViTForImageClassification", VitHead::kImageClassification, kImageClassificationHead},
                                               {"ViTModel", VitHead::kNone, ""}});
  static const ArchitectureTable<VitHead> mae({{"ViTMAEForPreTraining", VitHead::kMaePreTraining, ""},
                                               {"ViTMAEModel", VitHead::kNone, ""}});
  return model_type == "vit_mae" ? mae : vit;
}

const ConfigTable<VitConfig>& VitConfig::table() {
  using C = VitConfig;
  static const ConfigTable<C> table = [] {
    auto vit = [](const C& c) { return !c.mae(); };
    auto mae = [](const C& c) { return c.mae(); };
    auto kind = [](const C& c) { return c.model_type; };
    auto classifies = [](const C& c) { return c.head == VitHead::kImageClassification; };
    std::vector<ConfigField<C>> rows = {
        fields::number("hidden_size", &C::hidden_size, int64_t{1}),
        fields::number("num_hidden_layers", &C::num_hidden_layers, int64_t{0}),
        fields::number("num_attention_heads", &C::num_attention_heads, int64_t{1}),
        fields::number("intermediate_size", &C::intermediate_size, int64_t{1}),
        fields::choice("hidden_act", &C::hidden_act, {"gelu", "gelu_new", "relu"}),
        fields::number("hidden_dropout_prob", &C::hidden_dropout_prob, 0.0, 1.0),
        fields::number("attention_probs_dropout_prob", &C::attention_probs_dropout_prob, 0.0, 1.0),
        fields::number("initializer_range", &C::initializer_range, 0.0),
        fields::number("layer_norm_eps", &C::layer_norm_eps, 0.0),
        fields::number("image_size", &C::image_size, int64_t{1}),
        fields::number("patch_size", &C::patch_size, int64_t{1}),
        fields::number("num_channels", &C::num_channels, int64_t{1}),
        fields::fixed<C>("qkv_bias", true),
        fields::number("encoder_stride", &C::encoder_stride, int64_t{1}).owned_by(vit, "ViT", kind),
        fields::number("pooler_output_size", &C::pooler_output_size, int64_t{1}).owned_by(vit, "ViT", kind),
        fields::fixed<C>("pooler_act", "tanh").owned_by(vit, "ViT", kind),
        fields::number("decoder_hidden_size", &C::decoder_hidden_size, int64_t{1}).owned_by(mae, "ViT-MAE", kind),
        fields::number("decoder_num_hidden_layers", &C::decoder_num_hidden_layers, int64_t{0}).owned_by(mae, "ViT-MAE", kind),
        fields::number("decoder_num_attention_heads", &C::decoder_num_attention_heads, int64_t{1}).owned_by(mae, "ViT-MAE", kind),
        fields::number("decoder_intermediate_size", &C::decoder_intermediate_size, int64_t{1}).owned_by(mae, "ViT-MAE", kind),
        fields::number("mask_ratio", &C::mask_ratio, 0.0, 1.0).owned_by(mae, "ViT-MAE", kind),
        fields::flag("norm_pix_loss", &C::norm_pix_loss).owned_by(mae, "ViT-MAE", kind),
        labels_field(&C::num_labels).when(classifies).listed_when(classifies)};
    return ConfigTable<C>(rows, {});
  }();
  return table;
}

VitConfig VitConfig::from_json(const Json& j, const std::string& file) {
  VitConfig c;
  c.model_type = j.value("model_type", "vit");
  read_hf_config(table(), j, file, c);
  if (c.pooler_output_size < 0) c.pooler_output_size = c.hidden_size;
  // A value the file never set is quoted as the default it is, not as the file's.
  auto named = [&](const char* key, int64_t v) {
    return std::string(key) + " " + std::to_string(v) + (j.contains(key) || !std::isalpha(key[0]) ? "" : " (its default)");
  };
  auto divisible = [&](int64_t a, const char* an, int64_t b, const char* bn) {
    check_input(a % b == 0, file + ": " + named(an, a) + " is not divisible by " + (std::isdigit(bn[0]) ? std::string(bn) : named(bn, b)));
  };
  divisible(c.hidden_size, "hidden_size", c.num_attention_heads, "num_attention_heads");
  divisible(c.image_size, "image_size", c.patch_size, "patch_size");
  if (c.mae()) {
    divisible(c.decoder_hidden_size, "decoder_hidden_size", c.decoder_num_attention_heads, "decoder_num_attention_heads");
    // The sine-cosine positions put a quarter of the width on each of sin/cos of rows/columns.
    divisible(c.hidden_size, "hidden_size", 4, "4 (MAE's 2D sine-cosine positions)");
    divisible(c.decoder_hidden_size, "decoder_hidden_size", 4, "4 (MAE's 2D sine-cosine positions)");
    check_input(static_cast<int64_t>(static_cast<double>(c.grid() * c.grid()) * (1 - c.mask_ratio)) >= 1,
                file + ": mask_ratio " + Json(c.mask_ratio).dump() + " keeps no patch of " + std::to_string(c.grid() * c.grid()));
  }
  return c;
}

Json VitConfig::to_json() const { return write_hf_config(table(), model_type, *this); }

at::Tensor mae_sincos_positions(int64_t grid, int64_t dim) {
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const int64_t quarter = dim / 4;
  const at::Tensor omega = 1.0 / at::pow(10000.0, at::arange(quarter, f64) / static_cast<double>(quarter));  // (D/4)
  const at::Tensor g = at::arange(grid, f64);
  const auto hw = at::meshgrid({g, g}, "ij");
  const at::Tensor h = at::outer(hw[0].flatten(), omega), w = at::outer(hw[1].flatten(), omega);  // (grid², D/4)
  // [sin_h | cos_h | sin_w | cos_w], then the halves swapped as MAE's weights have them: [sin_w | cos_w | sin_h | cos_h].
  const at::Tensor pos = at::cat({w.sin(), w.cos(), h.sin(), h.cos()}, 1);
  return at::cat({at::zeros({1, dim}, f64), pos}, 0).to(at::kFloat);
}

namespace {

torch::nn::ModuleList vit_layers(int64_t n, int64_t d, int64_t heads, int64_t inner, const VitConfig& c) {
  torch::nn::ModuleList layers;
  for (int64_t i = 0; i < n; ++i) {
    layers->push_back(nn::TransformerLayer(nn::TransformerLayerOptions(d, heads, inner)
                                               .activation(nn::parse_activation(c.hidden_act))
                                               .norm_eps(c.layer_norm_eps)
                                               .pre_norm(true)
                                               .dropout(c.hidden_dropout_prob)
                                               .attention_dropout(c.attention_probs_dropout_prob)
                                               .layer(i)));
  }
  return layers;
}

// HF's ViTLayer names under `prefix` (…encoder.layer.N. or MAE's decoder.decoder_layers.N.).
void add_vit_layer_tensors(std::vector<HfTensor>& t, const std::string& prefix, torch::nn::ModuleList& layers,
                           const std::string& alias_prefix = "") {
  for (size_t i = 0; i < layers->size(); ++i) {
    auto layer = layers->ptr<nn::TransformerLayerImpl>(i);
    const std::string p = prefix + std::to_string(i) + ".";
    const size_t first = t.size();
    add_fused_linear(t, {p + "attention.attention.query", p + "attention.attention.key", p + "attention.attention.value"},
                     layer->self_attn->qkv);
    add_linear(t, p + "attention.output.dense", layer->self_attn->out);
    add_norm(t, p + "layernorm_before", layer->self_attn_norm);
    add_linear(t, p + "intermediate.dense", layer->ffn->in);
    add_linear(t, p + "output.dense", layer->ffn->out);
    add_norm(t, p + "layernorm_after", layer->ffn_norm);
    if (alias_prefix.empty()) continue;
    for (size_t k = first; k < t.size(); ++k) t[k].aliases.push_back(alias_prefix + std::to_string(i) + t[k].name.substr(p.size() - 1));
  }
}

}  // namespace

VitImpl::VitImpl(VitConfig config_) : config(std::move(config_)) {
  const auto& c = config;
  const int64_t d = c.hidden_size, patches = c.grid() * c.grid();
  patch_embedding = register_module(
      "patch_embedding", torch::nn::Conv2d(torch::nn::Conv2dOptions(c.num_channels, d, c.patch_size).stride(c.patch_size)));
  cls_token = register_parameter("cls_token", at::zeros({1, 1, d}));
  if (c.mae()) position_embeddings = register_buffer("position_embeddings", mae_sincos_positions(c.grid(), d).unsqueeze(0));
  else position_embeddings = register_parameter("position_embeddings", at::zeros({1, 1 + patches, d}));
  layers = register_module("layers", vit_layers(c.num_hidden_layers, d, c.num_attention_heads, c.intermediate_size, c));
  layernorm = register_module("layernorm", nn::Norm(nn::NormOptions(d).eps(c.layer_norm_eps)));
  if (c.head == VitHead::kNone && !c.mae()) pooler = register_module("pooler", torch::nn::Linear(d, c.pooler_output_size));
  if (c.head == VitHead::kImageClassification) classifier = register_module("classifier", torch::nn::Linear(d, c.num_labels));
  if (c.head == VitHead::kMaePreTraining) {
    const int64_t dd = c.decoder_hidden_size;
    decoder_embed = register_module("decoder_embed", torch::nn::Linear(d, dd));
    mask_token = register_parameter("mask_token", at::zeros({1, 1, dd}));
    decoder_position_embeddings = register_buffer("decoder_position_embeddings", mae_sincos_positions(c.grid(), dd).unsqueeze(0));
    decoder_layers = register_module("decoder_layers", vit_layers(c.decoder_num_hidden_layers, dd, c.decoder_num_attention_heads,
                                                                  c.decoder_intermediate_size, c));
    decoder_norm = register_module("decoder_norm", nn::Norm(nn::NormOptions(dd).eps(c.layer_norm_eps)));
    decoder_pred = register_module("decoder_pred", torch::nn::Linear(dd, c.patch_size * c.patch_size * c.num_channels));
  }
  if (initialise_weights()) reset_parameters();  // not when a checkpoint follows
}

void VitImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  const double std = config.initializer_range;
  // HF: Linear and Conv2d weights from trunc_normal_(std), cut at ±2 (torch's default bounds, far out at std 0.02).
  auto trunc_normal = [std](at::Tensor& w) {
    w.normal_(0, std);
    w.clamp_(-2.0, 2.0);
  };
  init_normal(*this, std);
  trunc_normal(patch_embedding->weight);
  patch_embedding->bias.zero_();
  if (config.mae()) {
    // MAE: the patch projection as a Linear's xavier_uniform, [CLS] and the mask token N(0, std).
    const double fan = static_cast<double>(patch_embedding->weight[0].numel() + patch_embedding->weight.size(0));
    const double bound = std::sqrt(6.0 / fan);
    patch_embedding->weight.uniform_(-bound, bound);
    cls_token.normal_(0, std);
    if (mask_token.defined()) mask_token.normal_(0, std);
  } else {
    trunc_normal(position_embeddings);
    trunc_normal(cls_token);
  }
  reset_norms(*this);
}

std::string VitImpl::architecture() const { return vit_architectures(config.model_type).name(config.head); }

Json VitImpl::config_fields() const {
  VitConfig defaults;
  defaults.model_type = config.model_type;
  defaults.head = config.head;
  defaults.pooler_output_size = config.hidden_size;
  return VitConfig::table().describe(config, defaults);
}

at::Tensor VitImpl::positions_for(int64_t height, int64_t width) const {
  const int64_t grid = config.grid();
  const int64_t nh = height / config.patch_size, nw = width / config.patch_size;
  if (nh == grid && nw == grid) return position_embeddings;
  // HF's interpolate_pos_encoding: the patch positions as a grid × grid image, resized bicubically.
  const int64_t d = position_embeddings.size(2);
  const at::Tensor patch = position_embeddings.slice(1, 1).reshape({1, grid, grid, d}).permute({0, 3, 1, 2});
  const at::Tensor resized = at::upsample_bicubic2d(patch, {nh, nw}, /*align_corners=*/false);
  return at::cat({position_embeddings.slice(1, 0, 1), resized.permute({0, 2, 3, 1}).reshape({1, nh * nw, d})}, 1);
}

at::Tensor VitImpl::encode(const at::Tensor& pixel_values, const at::Tensor& noise, at::Tensor* mask, at::Tensor* restore,
                           std::vector<at::Tensor>* hidden_states) {
  at::Tensor x = patch_embedding(pixel_values).flatten(2).transpose(1, 2);  // (B, N, D)
  const at::Tensor pos = positions_for(pixel_values.size(2), pixel_values.size(3));
  const int64_t b = x.size(0), n = x.size(1), d = x.size(2);
  if (config.mae()) {
    x = x + pos.slice(1, 1);
    // HF's random_masking: keep the patches of the len_keep smallest noise values, in that order.
    const int64_t keep = static_cast<int64_t>(static_cast<double>(n) * (1 - config.mask_ratio));
    const at::Tensor draw = noise.defined() ? noise.to(x.device()) : at::rand({b, n}, x.options());
    const at::Tensor shuffle = at::argsort(draw, /*dim=*/int64_t{1}, /*descending=*/false);
    const at::Tensor order = at::argsort(shuffle, /*dim=*/int64_t{1}, /*descending=*/false);
    x = at::gather(x, 1, shuffle.slice(1, 0, keep).unsqueeze(-1).expand({b, keep, d}));
    at::Tensor dropped = at::ones({b, n}, x.options());
    dropped.slice(1, 0, keep).zero_();
    if (mask) *mask = at::gather(dropped, 1, order);
    if (restore) *restore = order;
    x = at::cat({(cls_token + pos.slice(1, 0, 1)).expand({b, 1, d}), x}, 1);
  } else {
    x = at::cat({cls_token.expand({b, 1, d}), x}, 1) + pos;
    if (is_training() && config.hidden_dropout_prob > 0) x = nn::dropout(x, config.hidden_dropout_prob, true);
  }
  if (hidden_states) hidden_states->push_back(x);
  return run_layers(layers, x, nn::AttentionMask(), {}, {}, nullptr, hidden_states, &layernorm);
}

at::Tensor VitImpl::patchify(const at::Tensor& pixel_values) const {
  const int64_t b = pixel_values.size(0), c = pixel_values.size(1), p = config.patch_size;
  const int64_t nh = pixel_values.size(2) / p, nw = pixel_values.size(3) / p;
  return pixel_values.reshape({b, c, nh, p, nw, p}).permute({0, 2, 4, 3, 5, 1}).reshape({b, nh * nw, p * p * c});
}

void VitImpl::pretrain(const Batch& batch, Output& out, const at::Tensor& mask, const at::Tensor& restore) {
  at::Tensor h = decoder_embed(out.last_hidden_state);  // (B, 1 + kept, Dd)
  const int64_t b = h.size(0), n = restore.size(1), dd = h.size(2);
  const at::Tensor tokens = at::cat({h.slice(1, 1), mask_token.expand({b, n + 1 - h.size(1), dd})}, 1);
  h = at::cat({h.slice(1, 0, 1), at::gather(tokens, 1, restore.unsqueeze(-1).expand({b, n, dd}))}, 1);
  h = run_layers(decoder_layers, h + decoder_position_embeddings, nn::AttentionMask(), {}, {}, nullptr, nullptr,
                 &decoder_norm);
  out.logits = decoder_pred(h).slice(1, 1);  // (B, N, p² · C)
  at::Tensor target = patchify(batch.field(kPixelValues));
  if (config.norm_pix_loss) {
    const at::Tensor mean = target.mean(-1, true), var = target.var(-1, /*unbiased=*/true, /*keepdim=*/true);
    target = (target - mean) / at::sqrt(var + 1e-6);
  }
  const at::Tensor per_patch = (out.logits - target).pow(2).mean(-1);  // (B, N)
  out.loss = (per_patch * mask).sum() / mask.sum();
}

Output VitImpl::forward(const Batch& batch) {
  Output out;
  std::vector<at::Tensor>* hs = output_hidden_states ? &out.hidden_states : nullptr;
  at::Tensor mask, restore;
  out.last_hidden_state = encode(batch.field(kPixelValues), batch.field(kMaeNoise), &mask, &restore, hs);
  if (config.mae()) {
    out.named.emplace_back("mask", mask);
    out.named.emplace_back("ids_restore", restore);
  }
  if (pooler) out.pooler_output = at::tanh(pooler(out.last_hidden_state.select(1, 0)));
  if (classifier) {
    out.logits = classifier(out.last_hidden_state.select(1, 0));
    if (batch.labels.defined()) out.loss = classification_loss(out.logits, batch.labels);
  }
  if (config.head == VitHead::kMaePreTraining) pretrain(batch, out, mask, restore);
  return out;
}

void VitImpl::check_batch(const Batch& b) const {
  const std::string arch = architecture();
  check_input(!b.input_ids.defined(), arch + " reads images (pixel_values), not input_ids");
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"attention_mask", b.attention_mask},
                                {"token_type_ids", b.token_type_ids}, {"decoder_input_ids", b.decoder_input_ids}}) {
    check_unused(t, name, arch);
  }
  std::vector<std::string> extras = {kPixelValues};
  if (config.mae()) extras.push_back(kMaeNoise);
  check_extra_inputs(b, extras, arch);
  const at::Tensor px = b.field(kPixelValues);
  check_input(px.defined(), arch + " needs pixel_values (B, " + std::to_string(config.num_channels) + ", H, W)");
  check_input(px.dim() == 4 && at::isFloatingType(px.scalar_type()),
              "pixel_values must be (B, channels, height, width) floats; got " + c10::str(px.sizes()) + " " +
                  c10::toString(px.scalar_type()));
  check_input(px.size(1) == config.num_channels, "pixel_values has " + std::to_string(px.size(1)) + " channels; " + arch +
                                                     " takes num_channels " + std::to_string(config.num_channels));
  const bool square = px.size(2) == config.image_size && px.size(3) == config.image_size;
  check_input(px.size(2) % config.patch_size == 0 && px.size(3) % config.patch_size == 0 && px.size(2) > 0 && px.size(3) > 0,
              "pixel_values is " + std::to_string(px.size(2)) + "×" + std::to_string(px.size(3)) +
                  ", not a whole number of patches of patch_size " + std::to_string(config.patch_size));
  check_input(square || !config.mae() || config.head != VitHead::kMaePreTraining,
              arch + " reconstructs image_size " + std::to_string(config.image_size) + " images; pixel_values is " +
                  std::to_string(px.size(2)) + "×" + std::to_string(px.size(3)));
  const at::Tensor noise = b.field(kMaeNoise);
  if (noise.defined()) {
    const int64_t n = (px.size(2) / config.patch_size) * (px.size(3) / config.patch_size);
    check_input(noise.dim() == 2 && noise.size(0) == px.size(0) && noise.size(1) == n && at::isFloatingType(noise.scalar_type()),
                "noise must be (" + std::to_string(px.size(0)) + ", " + std::to_string(n) + ") floats, one a patch");
  }
  if (classifier && b.labels.defined()) check_row_labels(b.labels, px.size(0), config.num_labels, "labels");
  else check_unused(b.labels, "labels", arch);
}

std::vector<std::pair<std::string, int64_t>> VitImpl::loss_targets(const Batch& b) const {
  const at::Tensor px = b.field(kPixelValues);
  return {{"loss", px.defined() ? px.size(0) : 0}};
}

double VitImpl::flops_per_token(int64_t seq_len, int64_t) const {
  const double d = static_cast<double>(config.hidden_size);
  double flops = layer_flops_per_token(layers, seq_len) + 2.0 * d * static_cast<double>(config.num_channels * config.patch_size * config.patch_size);
  if (decoder_layers) flops += layer_flops_per_token(decoder_layers, seq_len);
  return flops;
}

std::vector<HfTensor> VitImpl::hf_tensors() {
  std::vector<HfTensor> t;
  const std::string b = config.head == VitHead::kNone ? "" : "vit.";
  t.push_back({b + "embeddings.cls_token", cls_token});
  t.push_back({b + "embeddings.position_embeddings", position_embeddings});
  t.push_back({b + "embeddings.patch_embeddings.projection.weight", patch_embedding->weight});
  t.push_back({b + "embeddings.patch_embeddings.projection.bias", patch_embedding->bias});
  add_vit_layer_tensors(t, b + "encoder.layer.", layers);
  add_norm(t, b + "layernorm", layernorm);
  if (pooler) add_linear(t, "pooler.dense", pooler);
  if (classifier) add_linear(t, "classifier", classifier);
  if (decoder_embed) {
    add_linear(t, "decoder.decoder_embed", decoder_embed);
    t.push_back({"decoder.mask_token", mask_token});
    t.push_back({"decoder.decoder_pos_embed", decoder_position_embeddings});
    // Transformers 5 saves the decoder's layers as decoder.decoder_encoder.layer.N: read too.
    add_vit_layer_tensors(t, "decoder.decoder_layers.", decoder_layers, "decoder.decoder_encoder.layer.");
    add_norm(t, "decoder.decoder_norm", decoder_norm);
    add_linear(t, "decoder.decoder_pred", decoder_pred);
  }
  return t;
}

bool VitImpl::hf_ignorable(const std::string& name) const {
  // A ViTModel's pooler under a head that has none (HF's ViTForImageClassification drops it too).
  return name.rfind("pooler.", 0) == 0 || name.rfind("vit.pooler.", 0) == 0;
}

namespace {

Family vit_like(const std::string& model_type) {
  Family f;
  f.model_type = model_type;
  f.images = true;
  f.summary = model_type == "vit" ? "ViT (Dosovitskiy et al. 2021): a Transformer encoder over image patches"
                                  : "ViT MAE (He et al. 2022): a ViT pretrained as a masked autoencoder of image patches";
  f.architectures = vit_architectures(model_type).names();
  f.heads = vit_architectures(model_type).heads();
  f.create = family_creator<VitImpl, VitConfig>(vit_architectures(model_type), [model_type](const Json& j, const std::string& file) {
    Json typed = j;
    typed["model_type"] = model_type;
    return VitConfig::from_json(typed, file);
  });
  return f;
}

}  // namespace

Family vit_family() { return vit_like("vit"); }
Family vit_mae_family() {
  Family f = vit_like("vit_mae");
  f.objectives = {{"mae", "ViTMAEForPreTraining"}};
  // The encoder finetunes as a ViT: the body's keys kept, MAE's decoder and masking dropped (its
  // fixed sine-cosine positions become the learned table's start; the decoder's weights go unused).
  f.finetunes_as = [](const Json& config) {
    Json vit = Json::object();
    for (auto it = config.begin(); it != config.end(); ++it) {
      const std::string& key = it.key();
      const bool mae_only = key.rfind("decoder_", 0) == 0 || key == "mask_ratio" || key == "norm_pix_loss";
      if (!mae_only && key != "architectures") vit[key] = it.value();
    }
    vit["model_type"] = "vit";
    return vit;
  };
  return f;
}

}  // namespace lmkit::models
