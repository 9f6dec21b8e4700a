// Images for ViT and MAE: IDX files (plain and gzip) read and refused by name, HF's
// normalisation, MAE's noise repeating with the seed, and lmkit-pretrain --objective mae.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/images.h"
#include "lmkit/data/loader.h"
#include "test_util.h"

using namespace lmkit;

namespace {

std::string be32(uint32_t v) { return {char(v >> 24), char((v >> 16) & 255), char((v >> 8) & 255), char(v & 255)}; }

// N images of h × w whose pixel (i, y, x) is (i + 3y + 5x) % 256, and labels i % 10.
void write_idx(const std::string& images, const std::string& labels, int n, int h, int w, bool gzip) {
  std::string img = be32(0x803) + be32(n) + be32(h) + be32(w), lab = be32(0x801) + be32(n);
  for (int i = 0; i < n; ++i) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) img += char((i + 3 * y + 5 * x) % 256);
    }
    lab += char(i % 10);
  }
  auto put = [&](const std::string& path, const std::string& bytes) {
    if (!gzip) {
      std::ofstream(path, std::ios::binary) << bytes;
      return;
    }
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  };
  put(images, img);
  if (!labels.empty()) put(labels, lab);
}

}  // namespace

TEST_CASE("images: IDX files read plain or gzipped, normalised as HF's ViTImageProcessor", "[data][images]") {
  test::TempDir dir;
  for (const bool gzip : {false, true}) {
    const std::string images = dir / (gzip ? "a-images-idx3-ubyte.gz" : "a-images-idx3-ubyte");
    const std::string labels = data::idx_labels_beside(images);
    CHECK(labels == dir / (gzip ? "a-labels-idx1-ubyte.gz" : "a-labels-idx1-ubyte"));
    write_idx(images, labels, 12, 8, 6, gzip);
    const data::ImageSet s = data::read_idx_images(images, labels);
    CHECK(s.count == 12);
    CHECK(s.height == 8);
    CHECK(s.width == 6);
    CHECK(s.labels[11] == 1);
    CHECK(s.pixels[static_cast<size_t>(3 * 48 + 2 * 6 + 1)] == (3 + 6 + 5) % 256);
    data::ImageDataset ds(std::make_shared<data::ImageSet>(s), data::ImageProcessor(), true, 0, 1);
    const data::Example e = ds.get(3, 0);
    CHECK(e.image_shape == std::vector<int64_t>{1, 8, 6});
    CHECK(e.class_label == 3);
    CHECK(e.pixels[2 * 6 + 1] == Approx((14 / 255.0 - 0.5) / 0.5));  // (x / 255 − 0.5) / 0.5
  }
  CHECK(data::idx_labels_beside(dir / "pictures.gz").empty());
}

TEST_CASE("images: MAE's noise repeats with (seed, epoch, index), and a batch stacks (B, C, H, W)", "[data][images]") {
  test::TempDir dir;
  write_idx(dir / "i", "", 8, 8, 8, false);
  auto set = std::make_shared<data::ImageSet>(data::read_idx_images(dir / "i"));
  data::ImageDataset ds(set, data::ImageProcessor(), false, 4, 7);
  CHECK(ds.get(2, 0).patch_noise == ds.get(2, 0).patch_noise);
  CHECK(ds.get(2, 0).patch_noise != ds.get(2, 1).patch_noise);
  CHECK(ds.get(2, 0).patch_noise != ds.get(3, 0).patch_noise);
  CHECK(ds.get(2, 0).class_label == -1);
  const Batch b = data::collate({ds.get(0, 0), ds.get(1, 0), ds.get(2, 0)}, 0);
  CHECK(!b.input_ids.defined());
  CHECK(b.field(kPixelValues).sizes() == at::IntArrayRef({3, 1, 8, 8}));
  CHECK(b.field(kMaeNoise).sizes() == at::IntArrayRef({3, 4}));
  CHECK(b.rows() == 3);
  CHECK(!b.labels.defined());
}

TEST_CASE("images: a file that is not IDX images, a truncated one and labels of another count are named", "[data][images]") {
  test::TempDir dir;
  std::ofstream(dir / "text") << "hello, not an IDX file\n";
  CHECK_THROWS_WITH(data::read_idx_images(dir / "text"), Catch::Contains("text: not an IDX file of images"));
  write_idx(dir / "img", dir / "lab", 5, 4, 4, false);
  CHECK_THROWS_WITH(data::read_idx_images(dir / "lab"), Catch::Contains("not an IDX file of images"));
  CHECK_THROWS_WITH(data::read_idx_images(dir / "img", dir / "img"), Catch::Contains("not an IDX file of labels"));
  write_idx(dir / "img6", dir / "lab6", 6, 4, 4, false);
  CHECK_THROWS_WITH(data::read_idx_images(dir / "img", dir / "lab6"), Catch::Contains("6 labels for the 5 images"));
  const std::string bytes = [&] {
    std::ifstream in(dir / "img", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  std::ofstream(dir / "short", std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  CHECK_THROWS_WITH(data::read_idx_images(dir / "short"), Catch::Contains("truncated"));
  std::ofstream(dir / "bad.gz", std::ios::binary) << std::string("\x1f\x8b\x08\x00garbage-garbage", 19);
  CHECK_THROWS_WITH(data::read_idx_images(dir / "bad.gz"), Catch::Contains("bad.gz"));
  CHECK_THROWS_WITH(data::read_idx_images(dir / "missing"), Catch::Contains("missing"));
}

TEST_CASE("images: lmkit-pretrain --objective mae trains ViT-MAE on IDX images and writes HF's preprocessor config",
          "[apps][images]") {
  test::TempDir dir;
  write_idx(dir / "train-images-idx3-ubyte.gz", "", 48, 8, 8, true);
  write_idx(dir / "t10k-images-idx3-ubyte.gz", "", 16, 8, 8, true);
  save_json_file(dir / "mae.json", {{"model_type", "vit_mae"}, {"hidden_size", 16}, {"num_hidden_layers", 1},
                                    {"num_attention_heads", 2}, {"intermediate_size", 32}, {"image_size", 8},
                                    {"patch_size", 2}, {"num_channels", 1}, {"decoder_hidden_size", 8},
                                    {"decoder_num_hidden_layers", 1}, {"decoder_num_attention_heads", 2},
                                    {"decoder_intermediate_size", 16}, {"norm_pix_loss", true}});
  const std::string base = "lmkit-pretrain --model " + (dir / "mae.json") + " --train " + (dir / "train-images-idx3-ubyte.gz") +
                           " --valid " + (dir / "t10k-images-idx3-ubyte.gz") + " --batch-size 8 --threads 1 --lr 1e-3 ";
  auto r = test::run(base + "--output " + (dir / "run") + " --steps 6");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("ViTMAEForPreTraining") && Catch::Contains("valid loss"));
  const Json config = load_json_file(dir / "run/final/config.json");
  CHECK(config["architectures"][0] == "ViTMAEForPreTraining");
  // Its rate is in images, and its pixel error has no perplexity.
  bool train_line = false, valid_line = false;
  std::ifstream metrics(dir / "run/metrics.jsonl");
  for (std::string text; std::getline(metrics, text);) {
    const Json line = Json::parse(text);
    if (line["split"] == "train") {
      train_line = true;
      CHECK(line["images_per_sec"].get<double>() > 0);
      CHECK_FALSE(line.contains("tokens_per_sec"));
    } else {
      valid_line = true;
      CHECK_FALSE(line.contains("perplexity"));
    }
  }
  CHECK((train_line && valid_line));
  CHECK_THAT(r.out, Catch::Contains("img/s="));
  const Json processor = load_json_file(dir / "run/final/preprocessor_config.json");
  CHECK(processor["image_processor_type"] == "ViTImageProcessor");
  CHECK(processor["size"]["height"] == 8);
  // Stopped after 3 steps and resumed: the same weights bit for bit as the 6 steps in one go.
  REQUIRE(test::run(base + "--output " + (dir / "half") + " --steps 6 --stop-at 3").code == 0);
  REQUIRE(test::run(base + "--output " + (dir / "half") + " --steps 6 --resume").code == 0);
  CHECK(read_file(dir / "half/final/model.safetensors") == read_file(dir / "run/final/model.safetensors"));
  // Text-only flags and images of another size are named.
  auto bad = test::run(base + "--output " + (dir / "b1") + " --steps 1 --seq-len 64");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--seq-len: objective mae reads images"));
  write_idx(dir / "big-images-idx3-ubyte", "", 8, 12, 12, false);
  bad = test::run("lmkit-pretrain --model " + (dir / "mae.json") + " --train " + (dir / "big-images-idx3-ubyte") + " --output " +
                  (dir / "b2") + " --steps 1 --threads 1");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("its images are 12×12 with 1 channel(s); the model takes 8×8"));
}

TEST_CASE("images: lmkit-finetune --task image-classification from an MAE checkpoint or at random, scored by lmkit-evaluate",
          "[apps][images]") {
  test::TempDir dir;
  write_idx(dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", 40, 8, 8, true);
  write_idx(dir / "dev-images-idx3-ubyte", dir / "dev-labels-idx1-ubyte", 12, 8, 8, false);
  const Json body = {{"hidden_size", 16}, {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"intermediate_size", 32},
                     {"image_size", 8},   {"patch_size", 2},        {"num_channels", 1}};
  Json mae = body, vit = body;
  mae.update({{"model_type", "vit_mae"}, {"decoder_hidden_size", 8}, {"decoder_num_hidden_layers", 1},
              {"decoder_num_attention_heads", 2}, {"decoder_intermediate_size", 16}});
  vit["model_type"] = "vit";
  save_json_file(dir / "mae.json", mae);
  save_json_file(dir / "vit.json", vit);
  REQUIRE(test::run("lmkit-pretrain --model " + (dir / "mae.json") + " --train " + (dir / "train-images-idx3-ubyte.gz") +
                    " --output " + (dir / "mae") + " --steps 2 --batch-size 8 --threads 1").code == 0);
  const std::string data = " --train " + (dir / "train-images-idx3-ubyte.gz") + " --dev " + (dir / "dev-images-idx3-ubyte") +
                           " --epochs 1 --batch-size 8 --lr 1e-3 --threads 1 --output ";
  // The MAE checkpoint finetunes as a ViT: its encoder read, the decoder left unused, a new classifier.
  auto r = test::run("lmkit-finetune --task image-classification --checkpoint " + (dir / "mae/final") + data + (dir / "ft"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("is a ViTMAEForPreTraining; ViTForImageClassification leaves its") &&
                        Catch::Contains("decoder.") && Catch::Contains("40 train / 12 dev examples, 10 labels"));
  const Json config = load_json_file(dir / "ft/best/config.json");
  CHECK(config["model_type"] == "vit");
  CHECK(config["architectures"][0] == "ViTForImageClassification");
  CHECK_FALSE(config.contains("decoder_hidden_size"));
  CHECK(load_json_file(dir / "ft/best/preprocessor_config.json")["image_processor_type"] == "ViTImageProcessor");
  CHECK(load_json_file(dir / "ft/best/label_map.json").size() == 10);
  CHECK_FALSE(std::filesystem::exists(dir / "ft/best/tokenizer.json"));
  CHECK_FALSE(std::filesystem::exists(dir / "ft/best/tokenizer.model"));
  // lmkit-evaluate on the dev file gives the dev figures the run kept.
  r = test::run("lmkit-evaluate --metric image-classification --checkpoint " + (dir / "ft/best") + " --data " +
                (dir / "dev-images-idx3-ubyte") + " --threads 1 --output " + (dir / "test.json") + " --predictions " + (dir / "p.tsv"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Json scored = load_json_file(dir / "test.json"), kept = load_json_file(dir / "ft/result.json");
  CHECK(scored["examples"] == 12);
  CHECK(scored["accuracy"].get<double>() == Approx(kept["accuracy"].get<double>()));
  CHECK(read_file(dir / "p.tsv") == read_file(dir / "ft/predictions.tsv"));
  // At random from a preset.
  r = test::run("lmkit-finetune --task image-classification --init random --model " + (dir / "vit.json") + data + (dir / "rnd"));
  INFO(r.out);
  CHECK(r.code == 0);
  // What an image model does not take is named.
  auto refused = [&](const std::string& command, const std::string& message) {
    auto bad = test::run(command);
    INFO(command << "\n" << bad.out);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains(message));
  };
  refused("lmkit-finetune --task image-classification --checkpoint " + (dir / "mae/final") + " --tokenizer x" + data + (dir / "b1"),
          "--tokenizer: model_type 'vit' reads images, not text");
  refused("lmkit-evaluate --metric perplexity --checkpoint " + (dir / "ft/best") + " --data " + (dir / "dev-images-idx3-ubyte") +
              " --output " + (dir / "b2.json"),
          "--metric perplexity reads text; " + (dir / "ft/best") + " is a model_type 'vit' model, which reads images (its "
          "metric: image-classification)");
  refused("lmkit-finetune --task classification --checkpoint " + (dir / "mae/final") + data + (dir / "b3"),
          "has no classification head");
  refused("lmkit-finetune --task image-classification --checkpoint " + (dir / "mae/final") + " --max-length 64" + data + (dir / "b6"),
          "--max-length: --task image-classification reads IDX images");
  refused("lmkit-evaluate --metric image-classification --checkpoint " + (dir / "ft/best") + " --data " +
              (dir / "dev-images-idx3-ubyte") + " --text-column 1 --output " + (dir / "b7.json"),
          "--text-column: --task image-classification reads IDX images");
  write_idx(dir / "bare-images-idx3-ubyte", "", 12, 8, 8, false);
  refused("lmkit-finetune --task image-classification --checkpoint " + (dir / "mae/final") + " --train " +
              (dir / "bare-images-idx3-ubyte") + " --dev " + (dir / "dev-images-idx3-ubyte") + " --output " + (dir / "b4"),
          "bare-images-idx3-ubyte: no labels file beside it");
  refused("lmkit-evaluate --metric image-classification --checkpoint " + (dir / "ft/best") + " --data " +
              (dir / "bare-images-idx3-ubyte") + " --output " + (dir / "b5.json"),
          "no labels file beside it");
}
