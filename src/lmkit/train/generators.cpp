#include "lmkit/train/generators.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <mutex>
#include <vector>

#include "lmkit/core/error.h"
#include "lmkit/dist/group.h"

namespace lmkit::train {

namespace {

at::Generator device_generator(c10::Device device) { return at::globalContext().defaultGenerator(device); }

at::Tensor state_of(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state().contiguous();  // (S) uint8 on the CPU, whatever the generator's device
}

void set_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state.clone());  // a row of the table is a view; set_state reads from the storage's start
}

// Each rank's state as row `rank` of a (ranks, S) table every rank receives: the bytes travel
// as doubles through the group's sum (exact for 0..255), so Gloo and NCCL both carry them.
at::Tensor gather(const at::Tensor& mine, dist::Group* group, c10::Device device) {
  if (!group) return mine.unsqueeze(0).clone();
  const int64_t s = mine.numel(), ranks = group->size();
  std::vector<double> table(static_cast<size_t>(ranks * s), 0.0);
  const uint8_t* bytes = mine.data_ptr<uint8_t>();
  for (int64_t i = 0; i < s; ++i) table[static_cast<size_t>(group->rank() * s + i)] = bytes[i];
  const std::vector<double> all = group->sum(table, device);
  at::Tensor out = at::empty({ranks, s}, at::kByte);
  uint8_t* o = out.data_ptr<uint8_t>();
  for (size_t i = 0; i < all.size(); ++i) o[i] = static_cast<uint8_t>(all[i]);
  return out;
}

}  // namespace

GeneratorStates capture_generators(c10::Device device, dist::Group* group) {
  GeneratorStates states;
  states.device_type = device.is_cuda() ? "cuda" : "cpu";
  states.cpu = gather(state_of(at::detail::getDefaultCPUGenerator()), group, device);
  if (device.is_cuda()) states.device = gather(state_of(device_generator(device)), group, device);
  return states;
}

std::optional<std::string> resume_mismatch(const std::string& saved_device, int64_t saved_ranks,
                                           const std::string& device, int64_t ranks) {
  if (saved_device != device) {
    return "warning: the checkpoint was written by a run on " + saved_device + " and resumes on " + device +
           ": training continues, but not bitwise as it would have there (another device's generator and kernels)";
  }
  if (saved_ranks != ranks) {
    return "warning: the checkpoint was written by " + std::to_string(saved_ranks) + " rank(s) and resumes on " +
           std::to_string(ranks) + ": training continues, but not bitwise (each rank's generator and data share differ)";
  }
  return std::nullopt;
}

std::optional<std::string> restore_generators(const GeneratorStates& states, c10::Device device, int64_t rank,
                                              int64_t world_size) {
  const std::string here = device.is_cuda() ? "cuda" : "cpu";
  const int64_t row = rank < states.ranks() ? rank : 0;
  if (states.cpu.defined()) set_state(at::detail::getDefaultCPUGenerator(), states.cpu[row]);
  // A CUDA generator's state means nothing to the CPU one (and a CPU run saved none): the
  // device's generator then keeps the run's seed.
  if (device.is_cuda() && states.device.defined()) set_state(device_generator(device), states.device[row]);
  return resume_mismatch(states.device_type, states.ranks(), here, world_size);
}

}  // namespace lmkit::train
