// ViT (Dosovitskiy et al. 2021) as HF's ViTModel and ViTForImageClassification: an image
// cut into patch_size² patches, each projected to hidden_size (a strided convolution), a
// [CLS] vector before them, learned positions (interpolated bicubically for another image
// size, as HF's interpolate_pos_encoding), a pre-norm encoder, a final LayerNorm; the
// classifier reads [CLS]. MAE (He et al. 2022) is model_type "vit_mae", HF's ViTMAEModel
// and ViTMAEForPreTraining: fixed 2D sine-cosine positions, a random mask_ratio of the
// patches dropped before the encoder (argsort of per-patch noise: Batch::extra "noise", else
// drawn), a narrower decoder over the encoded patches and mask tokens back in place, and the
// mean squared error of the predicted pixels of the masked patches (normalised per patch
// with norm_pix_loss).
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "lmkit/core/config_table.h"
#include "lmkit/models/architectures.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

enum class VitHead {
  kNone,                 ///< ViTModel (with its pooler) or ViTMAEModel (masked, no pooler)
  kImageClassification,  ///< ViTForImageClassification: [CLS] of the final norm -> linear
  kMaePreTraining,       ///< ViTMAEForPreTraining: the decoder and the pixel loss
};

using lmkit::kMaeNoise;     ///< core/batch.h: drawn from the RNG when absent
using lmkit::kPixelValues;  ///< core/batch.h

/// HF's ViTConfig and ViTMAEConfig keys.
struct VitConfig {
  std::string model_type = "vit";  ///< vit or vit_mae
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.0;
  double attention_probs_dropout_prob = 0.0;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  int64_t encoder_stride = 16;       ///< ViT's (HF's masked image modelling head; written back)
  int64_t pooler_output_size = -1;   ///< ViT's pooler width; -1: hidden_size
  int64_t num_labels = 2;            ///< the classifier's
  int64_t decoder_hidden_size = 512;  ///< MAE's decoder
  int64_t decoder_num_hidden_layers = 8;
  int64_t decoder_num_attention_heads = 16;
  int64_t decoder_intermediate_size = 2048;
  double mask_ratio = 0.75;
  bool norm_pix_loss = false;
  VitHead head = VitHead::kImageClassification;

  static const ConfigTable<VitConfig>& table();
  static VitConfig from_json(const Json& j, const std::string& file);
  Json to_json() const;
  bool mae() const { return model_type == "vit_mae"; }
  int64_t grid() const { return image_size / patch_size; }  ///< patches a side
};

class VitImpl : public Model {
 public:
  explicit VitImpl(VitConfig config);

  Output forward(const Batch& batch) override;
  std::string model_type() const override { return config.model_type; }
  std::string architecture() const override;
  Json config_json() const override { return config.to_json(); }
  Json config_fields() const override;
  std::vector<HfTensor> hf_tensors() override;
  bool hf_ignorable(const std::string& name) const override;
  std::string hf_base_prefix() const override { return "vit."; }
  int64_t vocab_size() const override { return 0; }
  double flops_per_token(int64_t seq_len, int64_t target_len) const override;
  void check_batch(const Batch& batch) const override;
  std::vector<std::pair<std::string, int64_t>> loss_targets(const Batch& batch) const override;
  /// Re-initialises every weight as HF does (truncated normal, unit norms, MAE's sine-cosine positions).
  void reset_parameters();

  /// The encoder over pixel_values (B, C, H, W): (B, 1 + patches kept, D) after the final
  /// norm. MAE: `mask` (B, patches) 1 where a patch was dropped, `restore` the inverse order.
  at::Tensor encode(const at::Tensor& pixel_values, const at::Tensor& noise, at::Tensor* mask, at::Tensor* restore,
                    std::vector<at::Tensor>* hidden_states);
  /// HF's patchify: (B, C, H, W) -> (B, patches, patch_size² · C), each patch's pixels row by row, channels last.
  at::Tensor patchify(const at::Tensor& pixel_values) const;

  VitConfig config;
  torch::nn::Conv2d patch_embedding{nullptr};  ///< (D, C, p, p), stride p
  at::Tensor cls_token;                        ///< (1, 1, D)
  at::Tensor position_embeddings;              ///< (1, 1 + patches, D): ViT's learned; MAE's a fixed buffer
  torch::nn::ModuleList layers{nullptr};       ///< pre-norm TransformerLayers
  nn::Norm layernorm{nullptr};
  torch::nn::Linear pooler{nullptr};           ///< ViTModel's, tanh
  torch::nn::Linear classifier{nullptr};       ///< (num_labels, D)
  torch::nn::Linear decoder_embed{nullptr};    ///< MAE: (decoder D, D)
  at::Tensor mask_token;                       ///< MAE: (1, 1, decoder D)
  at::Tensor decoder_position_embeddings;      ///< MAE: fixed (1, 1 + patches, decoder D)
  torch::nn::ModuleList decoder_layers{nullptr};
  nn::Norm decoder_norm{nullptr};
  torch::nn::Linear decoder_pred{nullptr};     ///< MAE: (p² · C, decoder D)

 private:
  at::Tensor positions_for(int64_t height, int64_t width) const;
  /// MAE's decoder over out.last_hidden_state and its loss: out.logits (B, patches, p² · C), out.loss.
  void pretrain(const Batch& batch, Output& out, const at::Tensor& mask, const at::Tensor& restore);
};
TORCH_MODULE(Vit);

/// MAE's fixed positions: HF's build_2d_sinusoidal_position_embedding over a grid × grid
/// patch layout with a zero [CLS] row, its two halves swapped as the original MAE laid
/// them out: (1 + grid², dim).
at::Tensor mae_sincos_positions(int64_t grid, int64_t dim);

/// The classes of model_type `vit` or `vit_mae` and the head each builds.
const ArchitectureTable<VitHead>& vit_architectures(const std::string& model_type);

struct Family;
/// The ViT and ViT-MAE families (family.h).
Family vit_family();
Family vit_mae_family();

}  // namespace lmkit::models
