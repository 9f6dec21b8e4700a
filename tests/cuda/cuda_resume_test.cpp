// Exact resume on a GPU: under --deterministic, a stopped-and-resumed run's final weights
// are byte-identical to an uninterrupted run's, for presets with dropout (the device's
// generator is in the checkpoint), and two uninterrupted runs are identical (no
// non-deterministic kernel in the step); with ATen's dropout and with lmkit's fused
// kernels (the default; LMKIT_DISABLE=fused turns them off), whose dropout draws from the same generator. Skipped
// without a CUDA device.
#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include <iostream>

#include "../data/data_fixture.h"
#include "app_runner.h"
#include "lmkit/core/config.h"
#include "lmkit/core/cuda.h"
#include "lmkit/core/file.h"

using namespace lmkit;

namespace {

std::string args(const std::string& model, const std::string& objective, const std::string& out) {
  return "lmkit-pretrain --model " + test::model_preset(model) + " --objective " + objective + " --train " +
         test::sample("valid.txt") + " --valid " + test::sample("valid.txt") + " --output " + out +
         " --vocab-size 2000 --steps 8 --save-every 4 --batch-size 8 --seq-len 64 --lr 1e-3 --warmup 2"
         " --eval-batches 2 --threads 2 --device cuda --deterministic --seed 7";
}

// Uninterrupted twice, then stopped at step 4 and resumed: the three final weights files.
void check_exact_resume(const std::string& env, const std::string& model, const std::string& objective,
                        const std::string& dir) {
  auto app = [&](const std::string& a) { return test::run_shell(env + test::bin_dir() + "/" + a + " 2>&1"); };
  const std::string once = dir + "/once", again = dir + "/again", cut = dir + "/cut";
  for (const std::string& out : {once, again}) {
    auto r = app(args(model, objective, out));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  auto first = app(args(model, objective, cut) + " --stop-at 4");
  INFO(first.out);
  REQUIRE(first.code == 0);
  CHECK(load_json_file(cut + "/checkpoints/step-4/trainer_state.json")["generators"]["device"] == "cuda");
  auto second = app(args(model, objective, cut) + " --resume");
  INFO(second.out);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, !Catch::Contains("warning: the checkpoint"));
  const std::string weights = "/final/model.safetensors";
  // Two uninterrupted runs first: if they differ, a kernel of the step is not deterministic.
  CHECK(read_file(once + weights) == read_file(again + weights));
  CHECK(read_file(once + weights) == read_file(cut + weights));
}

}  // namespace

TEST_CASE("cuda: --deterministic stop and --resume is byte-identical to an uninterrupted run, dropout on",
          "[cuda][generators]") {
  if (!lmkit::cuda_available()) {
    std::cout << "LMKIT_SKIP: no CUDA device on this machine" << std::endl;
    return;
  }
  test::TempDir dir;
  for (const std::string env : {"LMKIT_DISABLE=fused ", ""}) {
    for (const auto& [model, objective] : std::vector<std::pair<std::string, std::string>>{
             {"gpt-mini", "clm"}, {"bert-mini", "mlm+nsp"}, {"t5-mini", "span"}}) {
      INFO(env << model);
      check_exact_resume(env, model, objective, dir / (model + (env.empty() ? "-fused" : "")));
    }
  }
}
