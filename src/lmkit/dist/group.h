// Data-parallel processes on PyTorch's own distributed engine: the launch
// environment (torchrun, SLURM, Open MPI), a c10d TCPStore rendezvous, and a
// c10d process group (Gloo on CPU, NCCL on CUDA) behind a small interface, so
// that nothing outside dist/ includes the c10d headers (docs/distributed.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace c10d {
class Work;
}

namespace lmkit::dist {

/// Where this process stands in a launched job, read from the environment.
struct Launch {
  bool active = false;       ///< a launcher set the variables (even for one process)
  int64_t rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr;   ///< the rank-0 host running the TCPStore
  int master_port = 29500;   ///< torchrun's default
  std::string source;        ///< "torchrun", "slurm", "openmpi" or "" when not launched
  /// torchrun's agent already serves the TCPStore at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  /// every rank joins it as a client, under the prefix of this restart attempt.
  bool agent_store = false;
  int64_t restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT
  /// Every rank on this node: torchrun's LOCAL_WORLD_SIZE, SLURM_NNODES or Open MPI's local size
  /// equal to the world size, or (variables set by hand) MASTER_ADDR on the loopback.
  bool one_node = false;
};

/// Reads the launch variables, most specific first: RANK / WORLD_SIZE / LOCAL_RANK /
/// MASTER_ADDR / MASTER_PORT (torchrun --no-python, or set by hand), then SLURM's
/// SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, then Open MPI's OMPI_COMM_WORLD_RANK /
/// _SIZE / _LOCAL_RANK (both with MASTER_ADDR / MASTER_PORT from the environment;
/// a job on one node defaults MASTER_ADDR to 127.0.0.1). A malformed or inconsistent
/// value is an InputError naming the variable. `getenv` is replaceable for tests.
Launch read_launch(const std::function<const char*(const char*)>& getenv = nullptr);

/// The device a rank trains on: `--device cuda` means LOCAL_RANK's GPU in a launched
/// job; an explicit cuda:N or cpu is kept.
std::string device_for_rank(const std::string& device, const Launch& launch);

struct GroupOptions {
  std::string backend = "auto";              ///< auto (nccl for CUDA, gloo for CPU), gloo or nccl
  int64_t timeout_s = 600;                   ///< a collective or the rendezvous waiting longer fails
};

/// A collective in flight; wait() rethrows its failure as a RuntimeError.
class Work {
 public:
  explicit Work(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait();

 private:
  std::function<void()> wait_;
};

/// One c10d process group. Every rank must call the same collectives in the same order.
/// A failure (a peer that exited, a timeout) is a RuntimeError that says which rank saw it.
class Group {
 public:
  /// nullptr when no launcher set the variables; otherwise rendezvous at
  /// MASTER_ADDR:MASTER_PORT (rank 0 serves the TCPStore) and build the backend.
  static std::shared_ptr<Group> create(const Launch& launch, c10::Device device, const GroupOptions& options);
  ~Group();

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  bool leader() const { return rank_ == 0; }
  const std::string& backend() const { return backend_; }
  std::chrono::seconds timeout() const { return timeout_; }
  /// This rank's device: where its collectives' small tensors go (NCCL reduces GPU tensors only).
  c10::Device device() const { return device_; }

  /// Sum over ranks, in place; waits.
  void all_reduce_sum(at::Tensor& tensor);
  /// A few numbers summed over ranks, through `device` (NCCL reduces GPU tensors only).
  std::vector<double> sum(const std::vector<double>& values, c10::Device device);
  /// Sum over ranks, in place; returns at once (the reduction runs on the backend's threads or stream).
  Work all_reduce_sum_async(at::Tensor tensor);
  /// Rank r's chunk r of `input` (size() equal chunks of output.numel()) summed over ranks into
  /// `output`; returns at once (c10d's reduce_scatter_tensor).
  Work reduce_scatter_sum_async(at::Tensor output, at::Tensor input);
  /// Every rank's `input` side by side, in rank order, into `output` (size() × input.numel()); waits
  /// (c10d's all_gather_into_tensor).
  void all_gather(at::Tensor output, at::Tensor input);
  /// all_gather, returning at once (the backend's threads or stream gather while the caller goes on).
  Work all_gather_async(at::Tensor output, at::Tensor input);
  /// Root's values into every rank's tensors, in place; waits.
  void broadcast(std::vector<at::Tensor>& tensors, int64_t root = 0);
  /// Waits until every rank has arrived.
  void barrier();

 private:
  struct Impl;
  Group(std::unique_ptr<Impl> impl, int64_t rank, int64_t size, std::string backend, std::chrono::seconds timeout,
        c10::Device device);
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;
  /// `start` launches a collective; the Work waits for it, each failure said as fail() says it.
  Work async(const std::string& what, const std::function<c10::intrusive_ptr<c10d::Work>()>& start);
  std::unique_ptr<Impl> impl_;
  int64_t rank_, size_;
  std::string backend_;
  std::chrono::seconds timeout_;
  c10::Device device_;
};

/// Runs `fn` on rank 0 alone, then tells every rank how it went (one all-reduce of rank 0's exit
/// code, in place of a barrier): rank 0 rethrows its failure, the others throw FollowerStop with
/// its exit code (rank 0's `error:` line says why; theirs would be a collective's "connection
/// closed by peer"). Without a group, just runs it.
void leader_only(Group* group, const std::function<void()>& fn);

/// Runs `fn` on rank 0 first (leader_only) and on the other ranks after it has finished (files
/// rank 0 writes, e.g. a trained tokenizer or an encoded corpus, are then there to read).
void leader_first(Group* group, const std::function<void()>& fn);

/// Makes every rank's parameters and buffers rank 0's.
void broadcast_module(Group& group, const std::vector<at::Tensor>& tensors);

/// Whether this build can make NCCL process groups (CUDA LibTorch and nccl.h at build time).
bool nccl_available();

}  // namespace lmkit::dist
