#include "lmkit/dist/group.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <c10/util/Logging.h>

#include <csignal>
#include <cstdlib>

#include "lmkit/core/error.h"
#include "lmkit/dist/backends.h"

namespace lmkit::dist {

namespace {

// A launch variable as a non-negative integer; absent: -1.
int64_t integer_variable(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) return -1;
  const std::string s(v);
  if (s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
    throw InputError("environment variable " + std::string(name) + "='" + s.substr(0, 40) +
                     "' is not a non-negative integer");
  }
  return std::stoll(s);
}

std::string string_variable(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

// torchrun's LOCAL_WORLD_SIZE equal to the world size; variables set by hand, MASTER_ADDR on the loopback.
bool torchrun_one_node(const std::function<const char*(const char*)>& getenv, const Launch& l) {
  const int64_t local = integer_variable(getenv, "LOCAL_WORLD_SIZE");
  if (local >= 0) return local == l.world_size;
  return l.master_addr == "127.0.0.1" || l.master_addr == "localhost" || l.master_addr == "::1";
}

}  // namespace

Launch read_launch(const std::function<const char*(const char*)>& getenv_in) {
  const std::function<const char*(const char*)> getenv =
      getenv_in ? getenv_in : [](const char* name) -> const char* { return std::getenv(name); };
  Launch l;
  // Which launcher: the explicit torchrun variables win (torchrun inside a SLURM allocation).
  const char* rank_var = nullptr;
  const char* size_var = nullptr;
  const char* local_var = nullptr;
  bool one_node = false;
  if (getenv("RANK") || getenv("WORLD_SIZE")) {
    rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
    l.source = "torchrun";
  } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
    rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS", local_var = "SLURM_LOCALID";
    l.source = "slurm";
    one_node = integer_variable(getenv, "SLURM_NNODES") == 1;
  } else if (getenv("OMPI_COMM_WORLD_RANK") && getenv("OMPI_COMM_WORLD_SIZE")) {
    rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE", local_var = "OMPI_COMM_WORLD_LOCAL_RANK";
    l.source = "openmpi";
    one_node = integer_variable(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE") == integer_variable(getenv, "OMPI_COMM_WORLD_SIZE");
  } else {
    return l;
  }
  l.active = true;
  l.rank = integer_variable(getenv, rank_var);
  l.world_size = integer_variable(getenv, size_var);
  if (l.rank < 0 || l.world_size < 0) {
    throw InputError(std::string("environment: ") + rank_var + " and " + size_var + " must both be set (" + l.source +
                     " launch)");
  }
  if (l.world_size < 1) throw InputError(std::string("environment variable ") + size_var + " must be >= 1");
  if (l.rank >= l.world_size) {
    throw InputError(std::string("environment: ") + rank_var + "=" + std::to_string(l.rank) + " is not below " + size_var +
                     "=" + std::to_string(l.world_size));
  }
  l.local_rank = std::max<int64_t>(integer_variable(getenv, local_var), 0);
  l.master_addr = string_variable(getenv, "MASTER_ADDR");
  const int64_t port = integer_variable(getenv, "MASTER_PORT");
  if (port >= 0) {
    if (port < 1 || port > 65535) throw InputError("environment variable MASTER_PORT=" + std::to_string(port) + " is not a TCP port");
    l.master_port = static_cast<int>(port);
  }
  l.one_node = one_node || l.world_size == 1 || (l.source == "torchrun" && torchrun_one_node(getenv, l));
  l.agent_store = string_variable(getenv, "TORCHELASTIC_USE_AGENT_STORE") == "True";
  l.restart_count = std::max<int64_t>(integer_variable(getenv, "TORCHELASTIC_RESTART_COUNT"), 0);
  if (l.master_addr.empty()) {
    if (l.world_size == 1 || one_node) {
      l.master_addr = "127.0.0.1";
    } else {
      throw InputError("environment: MASTER_ADDR is not set (the host of rank 0; " + l.source +
                       " jobs on several nodes must export it, see docs/distributed.md)");
    }
  }
  return l;
}

std::string device_for_rank(const std::string& device, const Launch& launch) {
  if (launch.active && device == "cuda") return "cuda:" + std::to_string(launch.local_rank);
  return device;
}

struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
};

void Work::wait() {
  if (!wait_) return;
  const auto wait = std::move(wait_);  // once: a second wait() returns at once
  wait_ = nullptr;
  wait();
}

Group::Group(std::unique_ptr<Impl> impl, int64_t rank, int64_t size, std::string backend, std::chrono::seconds timeout,
             c10::Device device)
    : impl_(std::move(impl)), rank_(rank), size_(size), backend_(std::move(backend)), timeout_(timeout), device_(device) {}

Group::~Group() = default;

namespace {

// c10d logs each failed connection attempt with a C++ stack trace (41-47 stderr lines
// before lmkit's one `error:` line when rank 0 was absent): quiet while the group
// starts, unless the user asked for c10's log (TORCH_CPP_LOG_LEVEL).
class QuietC10Log {
 public:
  QuietC10Log() : level_(FLAGS_caffe2_log_level) {
    if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 3;  // FATAL only
  }
  ~QuietC10Log() { FLAGS_caffe2_log_level = level_; }
  QuietC10Log(const QuietC10Log&) = delete;
  QuietC10Log& operator=(const QuietC10Log&) = delete;

 private:
  int level_;
};

}  // namespace

std::shared_ptr<Group> Group::create(const Launch& launch, c10::Device device, const GroupOptions& o) {
  if (!launch.active) return nullptr;
  std::string backend = o.backend;
  if (backend == "auto") backend = device.is_cuda() ? "nccl" : "gloo";
  check_input(backend == "gloo" || backend == "nccl", "--backend '" + o.backend + "': expected auto, gloo or nccl");
  check_input(backend != "nccl" || device.is_cuda(), "--backend nccl needs --device cuda (NCCL reduces GPU tensors)");
  check_input(backend != "gloo" || !device.is_cuda(),
              "--backend gloo with --device cuda is not supported: use nccl (the default for CUDA)");
  check_input(o.timeout_s >= 1, "--dist-timeout must be >= 1 second");
  const std::chrono::seconds timeout_s(o.timeout_s);
  if (backend == "nccl" && !nccl_available()) {
    throw RuntimeError("this lmkit was built without NCCL (it needs a CUDA LibTorch and nccl.h at build time)");
  }
  // A write to a peer's closed socket (a rank killed mid-collective) raises SIGPIPE, which would
  // end this rank silently (exit -13, no error line): Python, which torch.distributed runs in,
  // ignores it, so Gloo and the store report EPIPE as an error instead. So does lmkit, from here on.
  std::signal(SIGPIPE, SIG_IGN);
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  auto impl = std::make_unique<Impl>();
  QuietC10Log quiet;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(launch.master_port);
    so.isServer = launch.rank == 0 && !launch.agent_store;
    so.numWorkers = static_cast<int>(launch.world_size);
    so.waitWorkers = !launch.agent_store;
    so.timeout = timeout_s;
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, so);
    // As torch.distributed's env:// rendezvous: keys of this attempt apart from a restarted job's.
    if (launch.agent_store) {
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(launch.restart_count), store);
    }
    impl->store = store;
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    throw RuntimeError("rank " + std::to_string(launch.rank) + ": rendezvous at " + where + " (MASTER_ADDR:MASTER_PORT) failed: " +
                       msg.substr(0, msg.find('\n')));
  }
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_s);
  try {
    impl->backend = backend == "gloo"
                        ? detail::make_gloo(impl->store, static_cast<int>(launch.rank), static_cast<int>(launch.world_size), timeout)
                        : detail::make_nccl(impl->store, static_cast<int>(launch.rank), static_cast<int>(launch.world_size),
                                            timeout, device);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    throw RuntimeError("rank " + std::to_string(launch.rank) + ": cannot start the " + backend + " process group: " +
                       msg.substr(0, msg.find('\n')));
  }
  return std::shared_ptr<Group>(new Group(std::move(impl), launch.rank, launch.world_size, backend, timeout_s, device));
}

void Group::fail(const std::string& what, const std::exception& e) const {
  std::string msg = e.what();
  msg = msg.substr(0, msg.find('\n'));
  if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
  throw RuntimeError("rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + what +
                     " failed (another rank exited, or none answered within --dist-timeout " +
                     std::to_string(timeout_.count()) + " s): " + msg);
}

void Group::all_reduce_sum(at::Tensor& tensor) { all_reduce_sum_async(tensor).wait(); }

std::vector<double> Group::sum(const std::vector<double>& values, c10::Device device) {
  at::Tensor t = at::tensor(values, at::kDouble).to(device);
  all_reduce_sum(t);
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

Work Group::async(const std::string& what, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = start();
  } catch (const std::exception& e) {
    fail(what, e);
  }
  return Work([this, work, what] {
    try {
      work->wait();
    } catch (const std::exception& e) {
      fail(what, e);
    }
  });
}

Work Group::all_reduce_sum_async(at::Tensor tensor) {
  return async("all-reduce", [&] {
    std::vector<at::Tensor> tensors{std::move(tensor)};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return impl_->backend->allreduce(tensors, options);
  });
}

Work Group::reduce_scatter_sum_async(at::Tensor output, at::Tensor input) {
  check_input(input.numel() == output.numel() * size_, "reduce-scatter: the input must hold size() chunks of the output");
  return async("reduce-scatter", [&] {
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return impl_->backend->_reduce_scatter_base(output, input, options);
  });
}

void Group::all_gather(at::Tensor output, at::Tensor input) { all_gather_async(std::move(output), std::move(input)).wait(); }

Work Group::all_gather_async(at::Tensor output, at::Tensor input) {
  check_input(output.numel() == input.numel() * size_, "all-gather: the output must hold size() chunks of the input");
  return async("all-gather", [&] { return impl_->backend->_allgather_base(output, input, c10d::AllgatherOptions()); });
}

void Group::broadcast(std::vector<at::Tensor>& tensors, int64_t root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  try {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      impl_->backend->broadcast(one, options)->wait();
    }
  } catch (const std::exception& e) {
    fail("broadcast", e);
  }
}

void Group::barrier() {
  try {
    impl_->backend->barrier(c10d::BarrierOptions())->wait();
  } catch (const std::exception& e) {
    fail("barrier", e);
  }
}

void leader_only(Group* group, const std::function<void()>& fn) {
  if (!group) return fn();
  double code = 0;
  std::exception_ptr failure;
  if (group->leader()) {
    try {
      fn();
    } catch (const Error& e) {
      code = static_cast<double>(e.code());
      failure = std::current_exception();
    } catch (...) {
      code = static_cast<double>(ExitCode::kRuntime);
      failure = std::current_exception();
    }
  }
  code = group->sum({code}, group->device())[0];  // rank 0's alone: the others add 0
  if (failure) std::rethrow_exception(failure);
  if (code != 0) throw FollowerStop(static_cast<ExitCode>(static_cast<int>(code)));
}

void leader_first(Group* group, const std::function<void()>& fn) {
  leader_only(group, fn);
  if (group && !group->leader()) fn();
}

void broadcast_module(Group& group, const std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> data;
  data.reserve(tensors.size());
  for (const auto& t : tensors) data.push_back(t.detach());
  group.broadcast(data, 0);
}

}  // namespace lmkit::dist
