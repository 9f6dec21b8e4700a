#include <catch2/catch.hpp>

#include <map>

#include "lmkit/core/error.h"
#include "lmkit/dist/group.h"

using namespace lmkit;

namespace {
dist::Launch launch(const std::map<std::string, std::string>& env) {
  return dist::read_launch([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST_CASE("launch: torchrun, SLURM and Open MPI variables", "[dist]") {
  const auto none = launch({});
  CHECK_FALSE(none.active);
  CHECK(dist::Group::create(none, c10::kCPU, {}) == nullptr);  // not launched: one process, no group

  const auto t = launch({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"},
                         {"MASTER_PORT", "29400"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  CHECK(t.active);
  CHECK(t.source == "torchrun");  // torchrun inside a SLURM allocation: its variables win
  CHECK((t.rank == 3 && t.world_size == 8 && t.local_rank == 1));
  CHECK((t.master_addr == "node7" && t.master_port == 29400));
  CHECK(dist::device_for_rank("cuda", t) == "cuda:1");
  CHECK(dist::device_for_rank("cuda:0", t) == "cuda:0");
  CHECK(dist::device_for_rank("cpu", t) == "cpu");

  const auto s = launch({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"}, {"SLURM_NNODES", "1"}});
  CHECK((s.source == "slurm" && s.rank == 5 && s.world_size == 6 && s.local_rank == 2));
  CHECK(s.master_addr == "127.0.0.1");  // one node: loopback
  CHECK(s.master_port == 29500);

  const auto m = launch({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}});
  CHECK((m.source == "openmpi" && m.rank == 1 && m.world_size == 4 && m.master_addr == "10.0.0.1"));

  const auto agent = launch({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                             {"TORCHELASTIC_RESTART_COUNT", "2"}});
  CHECK((agent.agent_store && agent.restart_count == 2));
  CHECK_FALSE(t.agent_store);

  // One node: every rank reads rank 0's files (its input errors are rank 0's; docs/distributed.md).
  CHECK_FALSE(t.one_node);  // torchrun on node7, no LOCAL_WORLD_SIZE
  CHECK(s.one_node);        // SLURM_NNODES=1
  CHECK_FALSE(m.one_node);  // 2 of 4 ranks on this node
  CHECK(launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}}).one_node);
  CHECK_FALSE(launch({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}}).one_node);
  CHECK(launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}}).one_node);  // set by hand, loopback
  CHECK(launch({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "node7"}}).one_node);
  CHECK(launch({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}).one_node);
}

TEST_CASE("launch: malformed or inconsistent variables are input errors naming them", "[dist]") {
  auto message = [](const std::map<std::string, std::string>& env) {
    try {
      launch(env);
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kInput);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), Catch::Contains("RANK='x'"));
  CHECK_THAT(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}), Catch::Contains("is not below WORLD_SIZE=2"));
  CHECK_THAT(message({{"RANK", "0"}}), Catch::Contains("RANK and WORLD_SIZE must both be set"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), Catch::Contains("WORLD_SIZE must be >= 1"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
             Catch::Contains("MASTER_PORT=70000"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "-1"}}),
             Catch::Contains("MASTER_PORT='-1'"));
  // Several nodes and nobody said where rank 0 is.
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), Catch::Contains("MASTER_ADDR is not set"));
  CHECK_THAT(message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_NNODES", "2"}}), Catch::Contains("MASTER_ADDR"));
}

TEST_CASE("group: flags that cannot work are refused before any rendezvous", "[dist]") {
  dist::Launch l;
  l.active = true, l.master_addr = "127.0.0.1";
  auto message = [&](c10::Device device, const std::string& backend, int64_t timeout) {
    try {
      dist::Group::create(l, device, {backend, timeout});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message(c10::kCPU, "nccl", 60), Catch::Contains("--backend nccl needs --device cuda"));
  CHECK_THAT(message(c10::kCPU, "mpi", 60), Catch::Contains("expected auto, gloo or nccl"));
  CHECK_THAT(message(c10::kCPU, "gloo", 0), Catch::Contains("--dist-timeout"));
}
