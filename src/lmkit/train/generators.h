// The random generators a training step draws from, saved in a checkpoint and
// restored on --resume, so that a stopped-and-resumed run is byte-identical to an
// uninterrupted one (docs/training.md, "Exact resume").
//
// On the CPU, dropout draws from LibTorch's default CPU generator. On CUDA, ATen's
// dropout and lmkit's fused kernels draw from the training device's default CUDA
// generator (a Philox seed and offset), and anything left on the CPU from the CPU
// one: both are saved. Under data parallelism each rank has its own: every rank's
// states are gathered to rank 0, which writes them, and each rank restores its own row.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace lmkit::dist {
class Group;
}

namespace lmkit::train {

/// Every rank's generator states: row r is rank r's.
struct GeneratorStates {
  std::string device_type = "cpu";  ///< where the run trained: "cpu" or "cuda"
  at::Tensor cpu;                   ///< (ranks, S) uint8: each rank's CPU generator state
  at::Tensor device;                ///< (ranks, S') uint8: each rank's CUDA generator; undefined on the CPU
  int64_t ranks() const { return cpu.defined() ? cpu.size(0) : 0; }
};

/// This process's generators on `device` (the CPU one, and the device's own on CUDA),
/// gathered from every rank of `group` (a collective: every rank calls it; nullptr: one process).
GeneratorStates capture_generators(c10::Device device, dist::Group* group);

/// Sets this process's generators to row `rank` of `states` (row 0 when the run had fewer
/// ranks). Returns a one-line warning when the resumed run cannot be bitwise the one that
/// was stopped (another device kind or number of ranks), nothing when it can.
std::optional<std::string> restore_generators(const GeneratorStates& states, c10::Device device, int64_t rank,
                                              int64_t world_size);

/// The warning restore_generators gives, from the saved and the current (device kind, ranks).
std::optional<std::string> resume_mismatch(const std::string& saved_device, int64_t saved_ranks,
                                           const std::string& device, int64_t ranks);

}  // namespace lmkit::train
