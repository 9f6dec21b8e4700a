// The generator states a checkpoint holds: captured and restored, the same draws follow;
// a resume on another device kind or number of ranks is named, not hidden.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "lmkit/train/generators.h"

using namespace lmkit;

TEST_CASE("generators: restoring captured states replays the same draws", "[train][generators]") {
  at::manual_seed(3);
  const at::Tensor warm = at::rand({7});  // the state is somewhere in the stream, not at the seed
  const train::GeneratorStates states = train::capture_generators(c10::Device(c10::kCPU), nullptr);
  REQUIRE(states.ranks() == 1);
  CHECK(states.device_type == "cpu");
  CHECK_FALSE(states.device.defined());
  CHECK(states.cpu.scalar_type() == at::kByte);
  const at::Tensor first = at::rand({64});
  const at::Tensor masks = at::bernoulli(at::full({256}, 0.5));
  at::manual_seed(99);  // what a resumed process does first: seed from the command line
  CHECK_FALSE(at::equal(at::rand({64}), first));
  const auto warning = train::restore_generators(states, c10::Device(c10::kCPU), 0, 1);
  CHECK_FALSE(warning.has_value());
  CHECK(at::equal(at::rand({64}), first));
  CHECK(at::equal(at::bernoulli(at::full({256}, 0.5)), masks));
}

TEST_CASE("generators: a rank restores its own row, and row 0 when the run had fewer ranks", "[train][generators]") {
  at::manual_seed(1);
  const at::Tensor a = train::capture_generators(c10::Device(c10::kCPU), nullptr).cpu;
  const at::Tensor after_a = at::rand({8});
  at::manual_seed(2);
  const at::Tensor b = train::capture_generators(c10::Device(c10::kCPU), nullptr).cpu;
  const at::Tensor after_b = at::rand({8});
  train::GeneratorStates two;
  two.cpu = at::cat({a, b});  // rank 0's, rank 1's
  REQUIRE(two.ranks() == 2);
  CHECK_FALSE(train::restore_generators(two, c10::Device(c10::kCPU), 1, 2).has_value());
  CHECK(at::equal(at::rand({8}), after_b));
  CHECK_FALSE(train::restore_generators(two, c10::Device(c10::kCPU), 0, 2).has_value());
  CHECK(at::equal(at::rand({8}), after_a));
  const auto grown = train::restore_generators(two, c10::Device(c10::kCPU), 2, 3);
  REQUIRE(grown.has_value());
  CHECK_THAT(*grown, Catch::Contains("2 rank(s)") && Catch::Contains("resumes on 3") && Catch::Contains("not bitwise"));
  CHECK(at::equal(at::rand({8}), after_a));
}

TEST_CASE("generators: a checkpoint from another device kind resumes with one warning", "[train][generators]") {
  CHECK_FALSE(train::resume_mismatch("cuda", 1, "cuda", 1).has_value());
  CHECK_FALSE(train::resume_mismatch("cpu", 4, "cpu", 4).has_value());
  const auto to_cpu = train::resume_mismatch("cuda", 1, "cpu", 1);
  REQUIRE(to_cpu.has_value());
  CHECK(to_cpu->rfind("warning: ", 0) == 0);
  CHECK(to_cpu->find('\n') == std::string::npos);
  CHECK_THAT(*to_cpu, Catch::Contains("written by a run on cuda") && Catch::Contains("resumes on cpu") &&
                          Catch::Contains("not bitwise"));
  CHECK_THAT(*train::resume_mismatch("cpu", 1, "cuda", 1), Catch::Contains("resumes on cuda"));
  // A CUDA run's states restored on the CPU: the CPU generator is set, the device's is not needed.
  at::manual_seed(5);
  train::GeneratorStates states = train::capture_generators(c10::Device(c10::kCPU), nullptr);
  const at::Tensor next = at::rand({4});
  states.device_type = "cuda";
  states.device = at::zeros({1, 16}, at::kByte);
  at::manual_seed(6);
  CHECK(train::restore_generators(states, c10::Device(c10::kCPU), 0, 1).has_value());
  CHECK(at::equal(at::rand({4}), next));
}
