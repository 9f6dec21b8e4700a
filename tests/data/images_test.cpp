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


// A PNG of h × w pixels (color type 0 gray or 2 RGB, 8 or 16 bits) whose sample (y, x, c) is
// (seed + 7y + 3x + 50c) % 256 (16 bits: that value in the high byte), written with zlib alone.
void write_png(const std::string& path, int h, int w, int color_type, int depth, int seed) {
  const int channels = color_type == 2 ? 3 : 1, bytes = depth / 8;
  auto chunk = [](const std::string& type, const std::string& data) {
    std::string body = type + data;
    const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
    return be32(static_cast<uint32_t>(data.size())) + body + be32(static_cast<uint32_t>(crc));
  };
  std::string raw;
  for (int y = 0; y < h; ++y) {
    raw += '\0';  // filter: none
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        raw += char((seed + 7 * y + 3 * x + 50 * c) % 256);
        if (bytes == 2) raw += char(17);
      }
    }
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(size, '\0');
  compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()));
  packed.resize(size);
  const std::string header = be32(w) + be32(h) + char(depth) + char(color_type) + std::string(3, '\0');
  std::ofstream(path, std::ios::binary) << "\x89PNG\r\n\x1a\n" + chunk("IHDR", header) + chunk("IDAT", packed) + chunk("IEND", "");
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
  // The images fuzzer's finding: dimensions whose product overflowed int64 before the size check.
  CHECK_THROWS_WITH(data::read_idx_images(test::source_dir() + "/tests/fuzz/regressions/images/dimensions-overflow"),
                    Catch::Contains("IDX dimensions describe more than 16 GiB"));
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
  bad = test::run(base + "--output " + (dir / "b3") + " --steps 1 --document-mask");  // was a silent no-op
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--document-mask and --reset-positions apply to objectives that pack documents"));
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
  // --metric classification of an image classifier is the image task's.
  r = test::run("lmkit-evaluate --metric classification --checkpoint " + (dir / "ft/best") + " --data " +
                (dir / "dev-images-idx3-ubyte") + " --threads 1 --output " + (dir / "test2.json"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(load_json_file(dir / "test2.json")["accuracy"] == scored["accuracy"]);
  CHECK(load_json_file(dir / "test2.json")["metric"] == "image-classification");
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
  // Training labels all of one class (255: 256 classes were made and one trained) are named.
  write_idx(dir / "one-images-idx3-ubyte", "", 12, 8, 8, false);
  std::ofstream(dir / "one-labels-idx1-ubyte", std::ios::binary) << be32(0x801) + be32(12) + std::string(12, char(255));
  refused("lmkit-finetune --task image-classification --checkpoint " + (dir / "mae/final") + " --train " +
              (dir / "one-images-idx3-ubyte") + " --dev " + (dir / "dev-images-idx3-ubyte") + " --output " + (dir / "b8"),
          "one-labels-idx1-ubyte: every training image is of one class (255): a classifier needs at least two");
}

TEST_CASE("images: a folder of PNG files, a class a subfolder, read as IDX is, and refused by name when it is not",
          "[data][images]") {
  test::TempDir dir;
  for (const char* cls : {"b-shirt", "a-coat"}) std::filesystem::create_directories(dir / (std::string("gray/") + cls));
  write_png(dir / "gray/a-coat/1.png", 4, 5, 0, 8, 0);
  write_png(dir / "gray/a-coat/2.PNG", 4, 5, 0, 16, 9);
  write_png(dir / "gray/b-shirt/1.png", 4, 5, 0, 8, 20);
  std::ofstream(dir / "gray/b-shirt/notes.txt") << "not an image";
  const data::ImageSet s = data::read_png_folder(dir / "gray");
  CHECK(s.count == 3);
  CHECK((s.channels == 1 && s.height == 4 && s.width == 5));
  CHECK(s.class_names == std::vector<std::string>{"a-coat", "b-shirt"});
  CHECK(s.labels == std::vector<int64_t>{0, 0, 1});
  CHECK(s.pixels[0] == 0);
  CHECK(s.pixels[1 * 5 + 2] == 7 + 6);                // image 0, (y 1, x 2)
  CHECK(s.pixels[20 + 3 * 5 + 4] == 9 + 21 + 12);     // image 1, 16 bits cut to their high byte
  CHECK(s.pixels[40] == 20);
  // RGB: channel-major, as IDX's images and pixel_values are.
  std::filesystem::create_directories(dir / "rgb/x");
  write_png(dir / "rgb/x/1.png", 2, 3, 2, 8, 1);
  const data::ImageSet rgb = data::read_png_folder(dir / "rgb");
  CHECK(rgb.channels == 3);
  CHECK(rgb.pixels[0 * 6 + 4] == 1 + 7 + 3);   // red (y 1, x 1)
  CHECK(rgb.pixels[2 * 6 + 4] == 1 + 7 + 3 + 100);  // blue
  // What is not a folder of PNGs of one size is named.
  std::filesystem::create_directories(dir / "bad/c");
  std::ofstream(dir / "bad/c/fake.png") << "GIF89a, not a PNG";
  CHECK_THROWS_WITH(data::read_png_folder(dir / "bad"), Catch::Contains("fake.png: not a PNG file"));
  std::filesystem::remove(dir / "bad/c/fake.png");
  write_png(dir / "bad/c/cut.png", 4, 5, 0, 8, 0);
  std::filesystem::resize_file(dir / "bad/c/cut.png", 45);
  CHECK_THROWS_WITH(data::read_png_folder(dir / "bad"), Catch::Contains("cut.png: a damaged PNG"));
  std::filesystem::remove(dir / "bad/c/cut.png");
  write_png(dir / "bad/c/a.png", 4, 5, 0, 8, 0);
  write_png(dir / "bad/c/b.png", 5, 5, 0, 8, 0);
  CHECK_THROWS_WITH(data::read_png_folder(dir / "bad"), Catch::Contains("b.png: 5×5 with 1 channel(s), where the folder's first image is 5×4"));
  CHECK_THROWS_WITH(data::read_png_folder(dir / "bad/c"), Catch::Contains("no class folders"));
  std::filesystem::create_directories(dir / "empty/c");
  CHECK_THROWS_WITH(data::read_png_folder(dir / "empty"), Catch::Contains("no PNG files in its class folders"));
}

TEST_CASE("images: lmkit-finetune --task image-classification on PNG folders names its classes by their folders",
          "[apps][images]") {
  test::TempDir dir;
  for (const char* split : {"train", "dev"}) {
    for (int k = 0; k < 3; ++k) {
      const std::string cls = dir / (std::string(split) + "/" + std::vector<std::string>{"bag", "coat", "shoe"}[k]);
      std::filesystem::create_directories(cls);
      for (int i = 0; i < 4; ++i) write_png(cls + "/" + std::to_string(i) + ".png", 8, 8, 0, 8, 40 * k + i);
    }
  }
  save_json_file(dir / "vit.json", {{"model_type", "vit"}, {"hidden_size", 16}, {"num_hidden_layers", 1},
                                    {"num_attention_heads", 2}, {"intermediate_size", 32}, {"image_size", 8},
                                    {"patch_size", 4}, {"num_channels", 1}});
  auto r = test::run("lmkit-finetune --task image-classification --init random --model " + (dir / "vit.json") + " --train " +
                     (dir / "train") + " --dev " + (dir / "dev") + " --epochs 1 --batch-size 4 --threads 1 --output " + (dir / "ft"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("12 train / 12 dev examples, 3 labels"));
  CHECK(load_json_file(dir / "ft/best/label_map.json") == Json{{"bag", 0}, {"coat", 1}, {"shoe", 2}});
  // HF's pipelines name the classes by config.json's id2label: the folders' names.
  CHECK(load_json_file(dir / "ft/best/config.json")["id2label"] == Json{{"0", "bag"}, {"1", "coat"}, {"2", "shoe"}});
  CHECK(load_json_file(dir / "ft/best/config.json")["label2id"] == Json{{"bag", 0}, {"coat", 1}, {"shoe", 2}});
  r = test::run("lmkit-evaluate --metric image-classification --checkpoint " + (dir / "ft/best") + " --data " + (dir / "dev") +
                " --threads 1 --output " + (dir / "dev.json"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(load_json_file(dir / "dev.json")["accuracy"] == load_json_file(dir / "ft/result.json")["accuracy"]);
  // A class the model was not finetuned on is named.
  std::filesystem::create_directories(dir / "other/hat");
  write_png(dir / "other/hat/0.png", 8, 8, 0, 8, 0);
  r = test::run("lmkit-evaluate --metric image-classification --checkpoint " + (dir / "ft/best") + " --data " + (dir / "other") +
                " --output " + (dir / "o.json"));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("class hat is not one of the model's 3 classes"));
}
