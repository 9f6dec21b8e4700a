// Fuzzes the image readers (ViT's and MAE's data) and the examples made of what they read:
// an IDX image file and a labels file (plain or gzip), or a PNG (an input that starts with
// PNG's signature, read as a one-class folder through libpng), are images or one InputError,
// and every example holds count · height · width normalised, finite pixels and its class.
#include <cmath>
#include <memory>

#include "fuzz_util.h"
#include "lmkit/data/images.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = lmkit::fuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  const auto images = lmkit::fuzz::scratch() / "f-images-idx3-ubyte";
  const auto labels = lmkit::fuzz::scratch() / "f-labels-idx1-ubyte";
  lmkit::fuzz::write_file(images, parts[0]);
  lmkit::fuzz::write_file(labels, parts[1]);
  const bool png = size >= 8 && std::string_view(reinterpret_cast<const char*>(data), 8) == "\x89PNG\r\n\x1a\n";
  const auto folder = lmkit::fuzz::scratch() / "png";
  if (png) {
    std::filesystem::create_directories(folder / "c");
    lmkit::fuzz::write_file(folder / "c" / "x.png", std::string_view(reinterpret_cast<const char*>(data), size));
  }
  lmkit::fuzz::expect_input_errors([&] {
    auto set = std::make_shared<lmkit::data::ImageSet>(
        png ? lmkit::data::read_png_folder(folder.string())
            : lmkit::data::read_idx_images(images.string(), parts[1].empty() ? "" : labels.string()));
    if (static_cast<int64_t>(set->pixels.size()) != set->count * set->channels * set->height * set->width) __builtin_trap();
    const bool with_labels = !set->labels.empty();
    if (with_labels && static_cast<int64_t>(set->labels.size()) != set->count) __builtin_trap();
    const int64_t grid = set->height % 2 == 0 && set->width % 2 == 0 ? (set->height / 2) * (set->width / 2) : 0;
    const lmkit::data::ImageDataset ds(set, lmkit::data::ImageProcessor(), with_labels, grid, 1);
    for (const int64_t i : {int64_t{0}, set->count - 1}) {
      const lmkit::data::Example e = ds.get(i, 0);
      if (static_cast<int64_t>(e.pixels.size()) != set->channels * set->height * set->width) __builtin_trap();
      for (const float v : e.pixels) {
        if (!std::isfinite(v) || v < -1.0f || v > 1.0f) __builtin_trap();  // (v / 255 - 0.5) / 0.5
      }
      if (with_labels && e.class_label != set->labels[static_cast<size_t>(i)]) __builtin_trap();
      if (static_cast<int64_t>(e.patch_noise.size()) != grid) __builtin_trap();
    }
  });
  return 0;
}
