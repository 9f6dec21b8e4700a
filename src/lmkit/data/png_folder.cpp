// Images as a folder of PNG files, one subfolder a class (torchvision's ImageFolder layout):
// decoded with libpng into an ImageSet (8-bit gray or RGB; palettes expanded, 16-bit
// stripped, alpha dropped), the classes the subfolders' names in sorted order.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "lmkit/core/error.h"
#include "lmkit/data/images.h"

namespace fs = std::filesystem;

namespace lmkit::data {

namespace {

struct Png {
  int64_t channels = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  ///< channel-major
};

// libpng reports errors through longjmp; the message is kept (outside the jumping frame) for
// the InputError thrown after it.
thread_local char png_message[200] = "";

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

void on_error(png_structp png, png_const_charp message) {
  std::snprintf(png_message, sizeof png_message, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

// Gray, gray+alpha, RGB, RGBA or a palette, 1–16 bits: 8-bit gray or RGB out.
void normalise_format(png_structp png, png_infop info) {
  const int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);  // an alpha channel (a palette's or gray's tRNS chunk is never expanded into one)
  png_read_update_info(png, info);
}

Png read_png(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) throw InputError(path + ": cannot open");
  unsigned char signature[8] = {};
  check_input(std::fread(signature, 1, 8, file.get()) == 8 && png_sig_cmp(signature, 0, 8) == 0, path + ": not a PNG file");
  PngReader r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, on_error, on_warning);
  if (r.png) r.info = png_create_info_struct(r.png);
  if (!r.png || !r.info) throw RuntimeError(path + ": libpng could not start");
  Png out;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> interleaved;
  if (setjmp(png_jmpbuf(r.png))) throw InputError(path + ": a damaged PNG (" + std::string(png_message) + ")");
  png_init_io(r.png, file.get());
  png_set_sig_bytes(r.png, 8);
  png_set_user_limits(r.png, 1 << 14, 1 << 14);  // no 2^31-pixel allocation from a forged header
  png_read_info(r.png, r.info);
  normalise_format(r.png, r.info);
  out.height = png_get_image_height(r.png, r.info);
  out.width = png_get_image_width(r.png, r.info);
  out.channels = png_get_channels(r.png, r.info);
  interleaved.resize(static_cast<size_t>(out.height * out.width * out.channels));
  for (int64_t y = 0; y < out.height; ++y) rows.push_back(interleaved.data() + y * out.width * out.channels);
  png_read_image(r.png, rows.data());
  png_read_end(r.png, nullptr);
  const int64_t plane = out.height * out.width;
  out.pixels.resize(interleaved.size());
  for (int64_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < out.channels; ++c) out.pixels[static_cast<size_t>(c * plane + i)] = interleaved[static_cast<size_t>(i * out.channels + c)];
  }
  return out;
}

// The PNG files of a class folder, by name.
std::vector<fs::path> pngs_in(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (entry.is_regular_file() && ext == ".png") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

ImageSet read_png_folder(const std::string& dir) {
  check_input(fs::is_directory(dir), dir + ": no such folder");
  ImageSet s;
  s.path = dir;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) s.class_names.push_back(entry.path().filename().string());
  }
  std::sort(s.class_names.begin(), s.class_names.end());
  check_input(!s.class_names.empty(), dir + ": no class folders (a folder of PNG files per class: DIR/CLASS/NAME.png)");
  for (size_t k = 0; k < s.class_names.size(); ++k) {
    for (const auto& file : pngs_in(fs::path(dir) / s.class_names[k])) {
      const Png png = read_png(file.string());
      if (s.count == 0) s.channels = png.channels, s.height = png.height, s.width = png.width;
      check_input(png.channels == s.channels && png.height == s.height && png.width == s.width,
                  file.string() + ": " + std::to_string(png.width) + "×" + std::to_string(png.height) + " with " +
                      std::to_string(png.channels) + " channel(s), where the folder's first image is " +
                      std::to_string(s.width) + "×" + std::to_string(s.height) + " with " + std::to_string(s.channels));
      s.pixels.insert(s.pixels.end(), png.pixels.begin(), png.pixels.end());
      s.labels.push_back(static_cast<int64_t>(k));
      ++s.count;
    }
  }
  check_input(s.count > 0, dir + ": no PNG files in its class folders");
  return s;
}

}  // namespace lmkit::data
