// ViT and ViT-MAE beyond HF parity (tests/interop/hf_interop.py, CTest "hf interop: t5 and vit both ways ..."):
// sizes, MAE's fixed positions, patch layout and masking, and bad inputs named.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/core/batch.h"
#include "lmkit/core/error.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/vit.h"
#include "test_util.h"

using namespace lmkit;

namespace {

Json vit_config(const std::string& type = "vit") {
  Json j = {{"model_type", type}, {"hidden_size", 32}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
            {"intermediate_size", 64}, {"image_size", 16}, {"patch_size", 4}, {"num_channels", 2}};
  if (type == "vit_mae") {
    j.update({{"decoder_hidden_size", 16}, {"decoder_num_hidden_layers", 1}, {"decoder_num_attention_heads", 2},
              {"decoder_intermediate_size", 32}});
  }
  return j;
}

Batch vit_images(int64_t b, int64_t c, int64_t h, int64_t w) {
  Batch batch;
  batch.extra[models::kPixelValues] = at::randn({b, c, h, w});
  return batch;
}

}  // namespace

TEST_CASE("vit: ViT-Base and ViT-MAE-Base have HF's parameter counts", "[models][vit]") {
  CHECK(models::count_parameters(*models::create_model({{"model_type", "vit"}}, "vit.json", "ViTModel")) == 86389248);
  // MAE's two position tables are fixed (HF: requires_grad=False; lmkit: buffers): the trainable count.
  CHECK(models::count_parameters(*models::create_model({{"model_type", "vit_mae"}}, "mae.json")) == 111655680);
}

TEST_CASE("vit: MAE's positions are sin/cos of columns then rows, and patches are read row by row", "[models][vit]") {
  const at::Tensor pos = models::mae_sincos_positions(3, 8);  // 3×3 patches, width 8: quarters of 2
  REQUIRE(pos.sizes() == at::IntArrayRef({10, 8}));
  CHECK(pos[0].abs().sum().item<double>() == 0.0);  // [CLS]
  // Patch (row 0, column 1) is row 2: sin(1·ω0) first, its row's sin(0) in the third quarter.
  CHECK(pos[2][0].item<double>() == Approx(std::sin(1.0)));
  CHECK(pos[2][1].item<double>() == Approx(std::sin(0.01)));  // ω1 = 1/10000^(1/2)
  CHECK(pos[2][4].item<double>() == Approx(0.0).margin(1e-7));
  CHECK(pos[1 + 3][4].item<double>() == Approx(std::sin(1.0)));  // (row 1, column 0)
  auto model = models::create_model(vit_config("vit_mae"), "mae.json");
  auto& vit = dynamic_cast<models::VitImpl&>(*model);
  const at::Tensor px = at::randn({1, 2, 16, 16});
  const at::Tensor patches = vit.patchify(px);  // (1, 16, 4·4·2)
  // Pixel (channel 1, y 5, x 10) is in patch (1, 2) at (1, 2) inside it, channels last.
  CHECK(patches[0][1 * 4 + 2][(1 * 4 + 2) * 2 + 1].item<double>() == px[0][1][5][10].item<double>());
}

TEST_CASE("vit: MAE keeps the patches of the smallest noise, and the draw repeats with the seed", "[models][vit]") {
  auto model = models::create_model(vit_config("vit_mae"), "mae.json");
  model->eval();
  Batch b = vit_images(2, 2, 16, 16);
  b.extra[models::kMaeNoise] = at::rand({2, 16});
  const Output out = model->forward(b);
  const at::Tensor mask = out.get("mask");
  CHECK(mask.sum(1).eq(12).all().item<bool>());  // 16 patches, 75% dropped
  const at::Tensor kept = at::argsort(b.field(models::kMaeNoise), int64_t{1}, false).slice(1, 0, 4);
  CHECK(at::gather(mask, 1, kept).sum().item<double>() == 0.0);
  CHECK(out.loss.item<double>() > 0);
  CHECK(out.logits.sizes() == at::IntArrayRef({2, 16, 32}));
  Batch drawn = vit_images(2, 2, 16, 16);
  at::manual_seed(3);
  const at::Tensor first = model->forward(drawn).get("mask");
  at::manual_seed(3);
  CHECK(at::equal(model->forward(drawn).get("mask"), first));
}

TEST_CASE("vit: bad images, configs and keys are named errors", "[models][vit]") {
  auto model = models::create_model(vit_config(), "vit.json");
  auto refused = [&](Batch b, const std::string& message) { CHECK_THROWS_WITH(model->check_batch(b), Catch::Contains(message)); };
  refused(vit_images(2, 3, 16, 16), "pixel_values has 3 channels; ViTForImageClassification takes num_channels 2");
  refused(vit_images(2, 2, 15, 16), "not a whole number of patches of patch_size 4");
  Batch ids = vit_images(2, 2, 16, 16);
  ids.input_ids = at::zeros({2, 4}, at::kLong);
  refused(ids, "reads images (pixel_values), not input_ids");
  refused(Batch(), "needs pixel_values");
  Batch labels = vit_images(2, 2, 16, 16);
  labels.labels = at::tensor({0, 7});
  refused(labels, "labels");
  Batch noise = vit_images(2, 2, 16, 16);
  noise.extra[models::kMaeNoise] = at::rand({2, 16});
  refused(noise, "noise");  // a ViT classifier draws no mask
  model->check_batch(vit_images(2, 2, 24, 16));  // another size: positions interpolated
  auto mae = models::create_model(vit_config("vit_mae"), "mae.json");
  Batch other = vit_images(1, 2, 24, 16);
  CHECK_THROWS_WITH(mae->check_batch(other), Catch::Contains("reconstructs image_size 16 images"));
  Json j = vit_config();
  j["image_size"] = 18;
  CHECK_THROWS_WITH(models::create_model(j, "v.json"), Catch::Contains("image_size 18 is not divisible by patch_size 4"));
  // A default is quoted as one, not as the file's value (ViT-Base's image_size 224 against a patch of 15).
  CHECK_THROWS_WITH(models::create_model({{"model_type", "vit"}, {"patch_size", 15}}, "v.json"),
                    Catch::Contains("v.json: image_size 224 (its default) is not divisible by patch_size 15"));
  j = vit_config();
  j["decoder_hidden_size"] = 16;
  CHECK_THROWS_WITH(models::create_model(j, "v.json"), Catch::Contains("key 'decoder_hidden_size' is ViT-MAE's"));
  j = vit_config("vit_mae");
  j["mask_ratio"] = 1.0;
  CHECK_THROWS_WITH(models::create_model(j, "v.json"), Catch::Contains("keeps no patch of 16"));
  j = vit_config();
  j["qkv_bias"] = false;
  CHECK_THROWS_WITH(models::create_model(j, "v.json"), Catch::Contains("'qkv_bias' = false is not supported"));
}
