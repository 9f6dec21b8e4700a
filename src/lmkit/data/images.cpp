#include "lmkit/data/images.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"

namespace lmkit::data {

namespace {

// A whole file, decompressed when it is gzip (zlib reads plain files as they are).
std::string read_maybe_gzip(const std::string& path) {
  check_readable_file(path);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw RuntimeError(path + ": cannot open");
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      throw InputError(path + ": a damaged gzip stream (" + why + ")");
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
    check_input(out.size() < (size_t{1} << 33), path + ": more than 8 GiB of IDX data");
  }
  gzclose(f);
  return out;
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

// The dimensions of an IDX file of unsigned bytes with `dims` dimensions, its data after them.
std::vector<int64_t> idx_header(const std::string& bytes, const std::string& path, uint32_t dims, const char* what) {
  const uint32_t magic = 0x00000800u | dims;
  check_input(bytes.size() >= 4 && big_endian(bytes, 0) == magic,
              path + ": not an IDX file of " + what + " (its first four bytes are not 00 00 08 0" + std::to_string(dims) + ")");
  check_input(bytes.size() >= 4 + 4 * size_t{dims}, path + ": truncated IDX header");
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    const int64_t n = big_endian(bytes, 4 + 4 * d);
    check_input(n >= 1 && n <= (int64_t{1} << 31), path + ": IDX dimension " + std::to_string(d) + " is " + std::to_string(n));
    // Checked before multiplying: three dimensions of 2^31 overflow int64 (found by the images fuzzer).
    check_input(n <= (int64_t{1} << 34) / total, path + ": IDX dimensions describe more than 16 GiB");
    total *= n;
    shape.push_back(n);
  }
  const size_t need = 4 + 4 * size_t{dims} + static_cast<size_t>(total);
  check_input(bytes.size() >= need, path + ": truncated: its header describes " + std::to_string(total) + " bytes of data, it holds " +
                                         std::to_string(bytes.size() - (4 + 4 * size_t{dims})));
  return shape;
}

}  // namespace

ImageSet read_idx_images(const std::string& images, const std::string& labels) {
  ImageSet s;
  s.path = images;
  const std::string bytes = read_maybe_gzip(images);
  const auto shape = idx_header(bytes, images, 3, "images (N × height × width unsigned bytes)");
  s.count = shape[0];
  s.height = shape[1];
  s.width = shape[2];
  s.pixels.assign(bytes.begin() + 16, bytes.begin() + 16 + s.count * s.height * s.width);
  if (labels.empty()) return s;
  const std::string lb = read_maybe_gzip(labels);
  const auto n = idx_header(lb, labels, 1, "labels (N unsigned bytes)");
  check_input(n[0] == s.count, labels + ": " + std::to_string(n[0]) + " labels for the " + std::to_string(s.count) +
                                   " images of " + images);
  for (int64_t i = 0; i < s.count; ++i) s.labels.push_back(static_cast<uint8_t>(lb[static_cast<size_t>(8 + i)]));
  return s;
}

std::string idx_labels_beside(const std::string& images) {
  const std::filesystem::path p(images);
  std::string name = p.filename().string();
  const size_t at = name.find("images-idx3-ubyte");
  if (at == std::string::npos) return "";
  name.replace(at, 17, "labels-idx1-ubyte");
  return (p.parent_path() / name).string();
}

std::shared_ptr<ImageSet> read_model_images(const std::string& path, const Json& model_config, bool labels) {
  std::string labels_path;
  const bool folder = std::filesystem::is_directory(path);
  if (labels && !folder) {
    labels_path = idx_labels_beside(path);
    check_input(!labels_path.empty(), path + ": no labels: the labels file is found beside the images by MNIST's naming "
                                             "(NAME-images-idx3-ubyte[.gz] -> NAME-labels-idx1-ubyte[.gz])");
    check_input(std::filesystem::exists(labels_path), path + ": no labels file beside it (" + labels_path + ")");
  }
  auto images = std::make_shared<ImageSet>(folder ? read_png_folder(path) : read_idx_images(path, labels_path));
  const int64_t size = model_config.value("image_size", int64_t{0}), channels = model_config.value("num_channels", int64_t{1});
  check_input(images->height == size && images->width == size && images->channels == channels,
              path + ": its images are " + std::to_string(images->height) + "×" + std::to_string(images->width) + " with " +
                  std::to_string(images->channels) + " channel(s); the model takes " + std::to_string(size) + "×" +
                  std::to_string(size) + " with " + std::to_string(channels) + " (lmkit does not resize)");
  return images;
}

Json ImageProcessor::to_json(int64_t channels, int64_t height, int64_t width) const {
  auto per_channel = [&](const std::vector<double>& v) {
    std::vector<double> out;
    for (int64_t c = 0; c < channels; ++c) out.push_back(v.size() == 1 ? v[0] : v[static_cast<size_t>(c)]);
    return out;
  };
  return {{"do_normalize", true}, {"do_rescale", true}, {"do_resize", true}, {"image_mean", per_channel(mean)},
          {"image_processor_type", "ViTImageProcessor"}, {"image_std", per_channel(std)}, {"resample", 2},
          {"rescale_factor", rescale}, {"size", {{"height", height}, {"width", width}}}};
}

ImageProcessor ImageProcessor::from_json(const Json& j, const std::string& file) {
  ImageProcessor p;
  check_input(j.is_object(), file + ": not an image processor's JSON object");
  auto numbers = [&](const char* key, std::vector<double>& out) {
    if (!j.contains(key)) return;
    const Json& v = j[key];
    check_input(v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const Json& x) { return x.is_number(); }),
                file + ": '" + key + "' is not a list of numbers");
    out = v.get<std::vector<double>>();
  };
  if (j.value("do_normalize", true)) {
    numbers("image_mean", p.mean);
    numbers("image_std", p.std);
    for (double s : p.std) check_input(s > 0, file + ": image_std holds " + Json(s).dump() + " (must be > 0)");
  } else {
    p.mean = {0.0};
    p.std = {1.0};
  }
  p.rescale = j.value("do_rescale", true) ? j.value("rescale_factor", p.rescale) : 1.0;
  return p;
}

float ImageProcessor::apply(uint8_t v, int64_t channel) const {
  const size_t c = mean.size() == 1 ? 0 : static_cast<size_t>(channel);
  const size_t s = std.size() == 1 ? 0 : static_cast<size_t>(channel);
  return static_cast<float>((v * rescale - mean[c]) / std[s]);
}

ImageDataset::ImageDataset(std::shared_ptr<const ImageSet> images, ImageProcessor processor, bool with_labels,
                           int64_t mae_patches, uint64_t seed)
    : images_(std::move(images)), processor_(std::move(processor)), with_labels_(with_labels), mae_patches_(mae_patches), seed_(seed) {
  check_input(!with_labels_ || static_cast<int64_t>(images_->labels.size()) == images_->count,
              images_->path + ": no labels (give the IDX labels file)");
  for (const auto* v : {&processor_.mean, &processor_.std}) {
    check_input(v->size() == 1 || static_cast<int64_t>(v->size()) == images_->channels,
                images_->path + ": the image processor has " + std::to_string(v->size()) + " values for " +
                    std::to_string(images_->channels) + " channels");
  }
}

Example ImageDataset::get(int64_t index, int64_t epoch) const {
  const ImageSet& s = *images_;
  const int64_t plane = s.height * s.width, size = s.channels * plane;
  Example e;
  e.image_shape = {s.channels, s.height, s.width};
  e.pixels.resize(static_cast<size_t>(size));
  const uint8_t* src = s.pixels.data() + index * size;
  for (int64_t i = 0; i < size; ++i) e.pixels[static_cast<size_t>(i)] = processor_.apply(src[i], i / plane);
  if (with_labels_) e.class_label = s.labels[static_cast<size_t>(index)];
  if (mae_patches_ > 0) {
    auto rng = example_rng(seed_, epoch, index);
    e.patch_noise.resize(static_cast<size_t>(mae_patches_));
    for (auto& x : e.patch_noise) x = static_cast<float>(uniform01(rng));
  }
  return e;
}

}  // namespace lmkit::data
