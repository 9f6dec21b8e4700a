// Images as datasets ship them, for ViT and MAE: IDX files (MNIST's and Fashion-MNIST's
// train-images-idx3-ubyte.gz and their labels, gzipped or not) read into memory, normalised
// as HF's ViTImageProcessor does (pixels / 255, then (x − mean) / std a channel; no resize:
// the images must have the model's image_size), and served as examples: the image and its
// class, or (MAE) the image and per-patch noise drawn from the example's seed, so a masking
// repeats with the seed and a resumed run sees what an uninterrupted one would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/data/dataset.h"

namespace lmkit::data {

/// Images of one size, 8-bit, channel-major, and their classes (empty without a labels file).
struct ImageSet {
  int64_t count = 0, channels = 1, height = 0, width = 0;
  std::vector<uint8_t> pixels;  ///< count · channels · height · width
  std::vector<int64_t> labels;  ///< count classes, or empty
  /// The classes' names (a PNG folder's subfolders), label i the i-th; empty: IDX's numbers are the names.
  std::vector<std::string> class_names;
  std::string path;
  /// The name of class `label`: its folder's, or the number itself.
  std::string class_name(int64_t label) const {
    return class_names.empty() ? std::to_string(label) : class_names.at(static_cast<size_t>(label));
  }
};

/// Reads an IDX image file (magic 0x00000803: unsigned bytes, 3 dimensions N × H × W) and,
/// when `labels` is given, its IDX labels (0x00000801, N). Plain or gzip. An InputError names
/// the file for another format, a truncated file, or counts that differ.
ImageSet read_idx_images(const std::string& images, const std::string& labels = "");

/// A folder of PNG files, one subfolder a class (torchvision's ImageFolder layout: DIR/CLASS/NAME.png),
/// decoded with libpng: 8-bit gray or RGB (palettes expanded, 16 bits cut to 8, alpha dropped), every
/// image of one size; the classes are the subfolders in sorted order. An InputError names a file
/// that is not a PNG, a damaged one, one of another size, or a folder without classes or images.
ImageSet read_png_folder(const std::string& dir);

/// The labels file MNIST's naming puts beside `images` ("train-images-idx3-ubyte.gz" ->
/// "train-labels-idx1-ubyte.gz"); "" when the name does not follow it.
std::string idx_labels_beside(const std::string& images);

/// The images at `path` for a model of config `model_config` (image_size, num_channels): a PNG
/// folder (read_png_folder, its classes with it) or an IDX file, with `labels` its classes from the
/// labels file beside it (idx_labels_beside), which must exist. An InputError naming the file when
/// their size or channels differ from the model's (lmkit does not resize).
std::shared_ptr<ImageSet> read_model_images(const std::string& path, const Json& model_config, bool labels);

/// HF ViTImageProcessor's rescale and normalisation (its defaults: 1/255, mean 0.5, std 0.5).
struct ImageProcessor {
  std::vector<double> mean = {0.5}, std = {0.5};  ///< one a channel (one value: every channel)
  double rescale = 1.0 / 255.0;
  /// HF's preprocessor_config.json for images of `height` × `width` and `channels`.
  Json to_json(int64_t channels, int64_t height, int64_t width) const;
  /// From a preprocessor_config.json (`file` for messages): do_rescale, rescale_factor,
  /// do_normalize, image_mean, image_std; do_resize must agree with the size it names.
  static ImageProcessor from_json(const Json& j, const std::string& file);
  /// The normalised value of pixel byte `v` in `channel`.
  float apply(uint8_t v, int64_t channel) const;
};

/// The examples of an ImageSet: pixels (Example::pixels), its class when `with_labels`
/// (Example::class_label), and with `mae_patches` > 0 that many uniform noise values drawn
/// from (seed, epoch, index) (Example::patch_noise).
class ImageDataset : public Dataset {
 public:
  ImageDataset(std::shared_ptr<const ImageSet> images, ImageProcessor processor, bool with_labels, int64_t mae_patches,
               uint64_t seed);
  int64_t size(int64_t) const override { return images_->count; }
  Example get(int64_t index, int64_t epoch) const override;

 private:
  std::shared_ptr<const ImageSet> images_;
  ImageProcessor processor_;
  bool with_labels_;
  int64_t mae_patches_;
  uint64_t seed_;
};

}  // namespace lmkit::data
