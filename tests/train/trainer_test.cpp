// The library's trainer as a program meets it (docs/library.md): TrainerInputs and
// TrainerOptions, a run directory that must be opened first, and a token classifier's
// validation accuracy (an objective with num_classes).
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "lmkit/core/error.h"
#include "lmkit/eval/loss.h"
#include "lmkit/models/registry.h"
#include "lmkit/train/trainer.h"

using namespace lmkit;

namespace {

// Blocks of 8 ids; labels are class (id % 2) for a token classifier, the ids for a language model.
class ParityDataset : public data::Dataset {
 public:
  explicit ParityDataset(bool classes) : classes_(classes) {}
  int64_t size(int64_t) const override { return 12; }
  data::Example get(int64_t index, int64_t) const override {
    data::Example e;
    for (int32_t j = 0; j < 8; ++j) {
      const int32_t id = static_cast<int32_t>(5 + (index * 7 + j * 3) % 90);
      e.input_ids.push_back(id);
      e.labels.push_back(classes_ ? (j == 0 ? -100 : id % 2) : id);
    }
    return e;
  }

 private:
  bool classes_;
};

Json trainer_tiny_gpt(int64_t labels) {
  Json c = {{"model_type", "gpt2"}, {"vocab_size", 97}, {"n_embd", 16}, {"n_layer", 1}, {"n_head", 2}, {"n_positions", 16}};
  if (labels > 0) c["num_labels"] = labels;
  return c;
}

std::string trainer_scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("lmkit-trainer-test-" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("trainer: TrainerInputs and TrainerOptions train a model in a directory open_run_directory opened",
          "[train][trainer]") {
  train::TrainerInputs in;
  in.model = models::create_model(trainer_tiny_gpt(0), "tiny.json", "GPT2LMHeadModel");
  in.train = std::make_shared<ParityDataset>(false);
  in.valid = std::make_shared<ParityDataset>(false);
  in.loader.batch_size = 4;
  in.loader.prefetch = 0;
  train::TrainerOptions o;
  o.steps = 3, o.output = trainer_scratch("lm");
  SECTION("a directory nobody opened is refused, naming open_run_directory") {
    std::filesystem::create_directories(o.output);
    CHECK_THROWS_AS(train::Trainer(in, o), Error);
    CHECK_THROWS_WITH(train::Trainer(in, o), Catch::Contains("open_run_directory"));
  }
  SECTION("an opened one trains, and the summary has the validation") {
    const auto lock = train::open_run_directory(o.output, false, false);
    const Json summary = train::Trainer(in, o).run();
    CHECK(summary["valid"].contains("perplexity"));
    CHECK_FALSE(summary["valid"].contains("accuracy"));
    CHECK(std::filesystem::exists(o.output + "/final/model.safetensors"));
  }
  SECTION("no model or no training examples is an InputError") {
    const auto lock = train::open_run_directory(o.output, false, false);
    train::TrainerInputs empty = in;
    empty.train = nullptr;
    CHECK_THROWS_WITH(train::Trainer(empty, o), Catch::Contains("needs a model and training examples"));
  }
  std::filesystem::remove_all(o.output);
}

TEST_CASE("trainer: a run that made its directory and wrote nothing there removes it; other directories stay",
          "[train][trainer]") {
  const std::string dir = trainer_scratch("unused");
  std::filesystem::remove_all(dir);
  { const auto lock = train::open_run_directory(dir, false, false); }  // failed on its input: nothing written
  CHECK_FALSE(std::filesystem::exists(dir));
  {
    const auto lock = train::open_run_directory(dir, false, false);
    std::ofstream(dir + "/metrics.jsonl") << "{}\n";
  }
  CHECK(std::filesystem::exists(dir + "/metrics.jsonl"));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);  // a folder the user made stays
  { const auto lock = train::open_run_directory(dir, false, false); }
  CHECK(std::filesystem::is_directory(dir));
  std::filesystem::remove_all(dir);
}

TEST_CASE("trainer: validation with eval_accuracy reports the argmax accuracy over the labelled positions",
          "[train][trainer]") {
  at::manual_seed(3);
  auto model = models::create_model(trainer_tiny_gpt(2), "tiny.json", "GPT2ForTokenClassification");
  auto data = std::make_shared<ParityDataset>(true);
  data::LoaderOptions lo;
  lo.batch_size = 4, lo.prefetch = 0;
  const Json r = eval::evaluate_loss(*model, data, lo, c10::kCPU, 0, nullptr, /*accuracy=*/true);
  // The same figure by hand: every example, eval mode, the first position unlabelled.
  model->eval();
  at::NoGradGuard no_grad;
  int64_t right = 0, labelled = 0;
  for (int64_t i = 0; i < data->size(0); ++i) {
    const data::Example e = data->get(i, 0);
    Batch b;
    b.input_ids = at::tensor(std::vector<int64_t>(e.input_ids.begin(), e.input_ids.end())).unsqueeze(0);
    b.attention_mask = at::ones_like(b.input_ids);
    const at::Tensor predicted = model->forward(b).logits.argmax(-1)[0];
    for (size_t j = 1; j < e.labels.size(); ++j) right += predicted[j].item<int64_t>() == e.labels[j], ++labelled;
  }
  REQUIRE(r.contains("accuracy"));
  CHECK(labelled == 12 * 7);
  CHECK(r["accuracy"].get<double>() == Approx(static_cast<double>(right) / static_cast<double>(labelled)));
  CHECK_FALSE(eval::evaluate_loss(*model, data, lo, c10::kCPU).contains("accuracy"));
}
