// --task image-classification: a class per image (ViT), from IDX files as MNIST and
// Fashion-MNIST ship them (the labels found beside the images by their naming), normalised
// as the checkpoint's preprocessor_config.json says (HF ViTImageProcessor's defaults for
// --init random), which every checkpoint of the run carries on.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/data/images.h"
#include "lmkit/eval/classification.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/tasks/builtin.h"

namespace lmkit::tasks {

namespace {

constexpr const char* kProcessorFile = "preprocessor_config.json";

// The checkpoint's normalisation ("" or none written: ViTImageProcessor's defaults).
data::ImageProcessor processor_of(const std::string& checkpoint) {
  const std::string file = checkpoint + "/" + kProcessorFile;
  if (checkpoint.empty() || !std::filesystem::exists(file)) return {};
  return data::ImageProcessor::from_json(load_json_file(file), file);
}

// Where `images` (read from `path`) name their classes: the labels file beside IDX images, or the PNG folder.
std::string labels_source(const data::ImageSet& images, const std::string& path) {
  return images.class_names.empty() ? data::idx_labels_beside(path) : path;
}

// `images` with their classes as ids of `label_map` (by name: a PNG folder's, an IDX label's number).
std::shared_ptr<data::Dataset> labelled_images(std::shared_ptr<data::ImageSet> images, const std::string& path,
                                               const std::map<std::string, int64_t>& label_map,
                                               const data::ImageProcessor& processor, int64_t max_examples) {
  for (int64_t& label : images->labels) {
    const std::string name = images->class_name(label);
    const auto it = label_map.find(name);
    check_input(it != label_map.end(), labels_source(*images, path) + ": class " + name + " is not one of the model's " +
                                           std::to_string(label_map.size()) + " classes");
    label = it->second;
  }
  std::shared_ptr<data::Dataset> ds = std::make_shared<data::ImageDataset>(images, processor, true, 0, 0);
  if (max_examples > 0 && max_examples < images->count) ds = std::make_shared<data::FirstExamples>(ds, max_examples);
  return ds;
}

// The classes of the training images: a PNG folder's subfolders, or IDX's label numbers 0 .. the largest.
std::map<std::string, int64_t> label_map_of(const data::ImageSet& images, const std::string& path) {
  int64_t classes = static_cast<int64_t>(images.class_names.size());
  for (int64_t label : images.labels) classes = std::max(classes, label + 1);
  check_input(classes >= 2, labels_source(images, path) + ": needs at least two classes");
  // Labels all 255 made 256 classes and trained on one of them; all 0 was refused.
  const std::set<int64_t> seen(images.labels.begin(), images.labels.end());
  check_input(seen.size() >= 2, labels_source(images, path) + ": every training image is of one class (" +
                                    images.class_name(images.labels.empty() ? 0 : images.labels.front()) +
                                    "): a classifier needs at least two");
  std::map<std::string, int64_t> map;
  for (int64_t i = 0; i < classes; ++i) map[images.class_name(i)] = i;
  return map;
}

// A text flag given to an image task is named, not ignored.
void refuse_text_flags(const Context& c) {
  for (const char* flag : {"--text-column", "--label-column", "--format", "--max-length", "--seq-len"}) {
    const CLI::Option* given = c.app ? c.app->get_option_no_throw(flag) : nullptr;  // each app has some of them
    check_input(given == nullptr || given->count() == 0,
                std::string(flag) + ": --task image-classification reads IDX images (their labels beside them) or PNG folders");
  }
}

class ImageClassification : public Task {
 public:
  void add_flags(CLI::App&, Mode) override {}

  Prepared prepare(const Context& c, const std::string& train, const std::string& dev) override {
    refuse_text_flags(c);
    const data::ImageProcessor processor = processor_of(c.checkpoint);
    auto train_images = data::read_model_images(train, c.model_config, /*labels=*/true);  // read once
    const auto label_map = label_map_of(*train_images, train);
    Prepared p;
    p.num_labels = static_cast<int64_t>(label_map.size());
    p.label_map = label_map;
    p.train_set = labelled_images(std::move(train_images), train, label_map, processor, 0);
    auto dev_set = labelled_images(data::read_model_images(dev, c.model_config, true), dev, label_map, processor, c.max_examples);
    p.dev_examples = dev_set->size(0);
    const int64_t size = c.model_config.value("image_size", int64_t{0});
    p.files[kProcessorFile] = processor.to_json(c.model_config.value("num_channels", int64_t{1}), size, size);
    p.evaluate = [dev_set, label_map, batch = c.batch_size, device = c.device](models::Model& m, const std::string& out) {
      eval::Predictions predictions;
      Json r = eval::evaluate_classifier(m, dev_set, batch, -1, device, out.empty() ? nullptr : &predictions);
      if (!out.empty()) write_file_atomic(out, eval::predictions_tsv(predictions, label_map));
      return r;
    };
    return p;
  }

  Json info() const override { return Json::object(); }  // the files say how they are read

  void use_info(const Json&, const CLI::App&) override {}

  Json evaluate(models::Model& model, const Context& c, const std::string& path, const std::string& predictions) override {
    refuse_text_flags(c);
    const int64_t num_labels = static_cast<int64_t>(model.config_json().value("id2label", Json::object()).size());
    const auto label_map = data::load_label_map(c.checkpoint, num_labels);
    const auto ds = labelled_images(data::read_model_images(path, c.model_config, true), path, label_map,
                                    processor_of(c.checkpoint), c.max_examples);
    eval::Predictions p;
    Json r = eval::evaluate_classifier(model, ds, c.batch_size, -1, c.device, predictions.empty() ? nullptr : &p);
    if (!predictions.empty()) write_file_atomic(predictions, eval::predictions_tsv(p, label_map));
    return r;
  }

  std::string best_metric() const override { return "accuracy"; }

  std::string describe(const Json& r) const override {
    char line[120];
    std::snprintf(line, sizeof line, "accuracy %.4f, macro-F1 %.4f", r["accuracy"].get<double>(), r["macro_f1"].get<double>());
    return line;
  }

  std::string result_name() const override { return "image-classification"; }
};

}  // namespace

TaskSpec image_classification_task() {
  TaskSpec t;
  t.name = "image-classification";
  t.summary = "a class per image (ViT; IDX images with their labels file beside them)";
  t.head = models::kImageClassificationHead;
  t.metric = "image-classification";
  t.predictions = "predictions.tsv";
  t.create = [] { return std::make_unique<ImageClassification>(); };
  return t;
}

}  // namespace lmkit::tasks
