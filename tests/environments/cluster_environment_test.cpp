// Cluster environments from the variables real launchers set (Open MPI's mpirun, torchrun
// inside a SLURM allocation), registry names in any case, and torchrun's error file.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/environments/environment_registry.h"
#include "volt/environments/kubeflow_environment.h"
#include "volt/environments/lsf_environment.h"
#include "volt/environments/mpi_environment.h"
#include "volt/environments/torchelastic_environment.h"
#include "volt/environments/torchelastic_error_file.h"
#include "volt/precision/precision_registry.h"
#include "volt/strategies/strategy_registry.h"
#include "support/expect.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::Environ;
using volt::TrainerOptions;
using volt::accelerators::HardwareProbe;
using volt::connectors::AcceleratorConnector;
using volt::connectors::Plan;
using Vars = std::map<std::string, std::string>;

HardwareProbe cpu_cores(int64_t n) {
  HardwareProbe p = HardwareProbe::assume("cpu", Environ());
  p.cpu_cores = n;
  return p;
}

TrainerOptions layout(const std::string& devices, int64_t num_nodes) {
  TrainerOptions o;
  o.accelerator = "cpu";
  o.strategy = "ddp";
  o.devices = devices;
  o.num_nodes = num_nodes;
  return o;
}

Plan env_plan(const TrainerOptions& o, const Vars& vars) {
  return AcceleratorConnector(o, Environ(vars), cpu_cores(4)).plan();
}

std::string env_plan_error(const TrainerOptions& o, const Vars& vars) {
  try {
    env_plan(o, vars);
  } catch (const volt::Error& e) {
    return e.what();
  }
  return "";
}

using volt::testing::mentions;

/// What Open MPI 4.1's mpirun sets for `rank` of `nodes` x `per_node` ranks mapped by slot
/// (its default): OMPI_COMM_WORLD_NODE_RANK is the process's index on its node.
Vars open_mpi(int64_t rank, int64_t nodes, int64_t per_node) {
  return {{"OMPI_COMM_WORLD_SIZE", std::to_string(nodes * per_node)},
          {"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % per_node)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(per_node)},
          {"OMPI_COMM_WORLD_NODE_RANK", std::to_string(rank % per_node)},
          {"OMPI_UNIVERSE_SIZE", std::to_string(nodes * per_node)},
          {"MASTER_ADDR", "node0"}};
}

// ------------------------------------------------------------ MPI

TEST(MPIEnvironment, TwoRanksOnOneNodeAreBothOnNodeZero) {
  // `mpirun -np 2` on one machine: rank 1 has OMPI_COMM_WORLD_NODE_RANK=1, yet one node.
  for (int64_t rank : {0, 1}) {
    Vars vars = open_mpi(rank, 1, 2);
    vars.erase("MASTER_ADDR");
    const Plan p = env_plan(layout("2", 1), vars);
    EXPECT_EQ(p.cluster_env, "mpi");
    EXPECT_EQ(p.global_rank, rank);
    EXPECT_EQ(p.local_rank, rank);
    EXPECT_EQ(p.node_rank, 0) << "rank " << rank;
    EXPECT_EQ(p.main_address, "127.0.0.1");
  }
}

TEST(MPIEnvironment, NodeRankIsGlobalRankOverLocalSizeOnSeveralNodes) {
  for (int64_t rank = 0; rank < 6; ++rank) {
    const Plan p = env_plan(layout("2", 3), open_mpi(rank, 3, 2));
    EXPECT_EQ(p.global_rank, rank);
    EXPECT_EQ(p.local_rank, rank % 2);
    EXPECT_EQ(p.node_rank, rank / 2) << "rank " << rank;
    EXPECT_EQ(p.main_address, "node0");
  }
  // MPICH / Intel MPI's variables give the same layout.
  const Plan pmi = env_plan(layout("2", 2), {{"PMI_SIZE", "4"},
                                         {"PMI_RANK", "3"},
                                         {"MPI_LOCALRANKID", "1"},
                                         {"MPI_LOCALNRANKS", "2"},
                                         {"MASTER_ADDR", "node0"}});
  EXPECT_EQ(pmi.node_rank, 1);
  EXPECT_EQ(pmi.local_rank, 1);
}

TEST(MPIEnvironment, RoundRobinMappingIsRefusedNamingTheVariables) {
  // `mpirun --map-by node`: rank 1 is the first rank of the second node.
  Vars vars = open_mpi(1, 2, 2);
  vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  EXPECT_TRUE(mentions(env_plan_error(layout("2", 2), vars),
                       {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_LOCAL_RANK=0", "--map-by slot"}));
  Vars bad_local = open_mpi(1, 1, 2);
  bad_local["OMPI_COMM_WORLD_LOCAL_RANK"] = "2";
  EXPECT_TRUE(
      mentions(env_plan_error(layout("2", 1), bad_local), {"OMPI_COMM_WORLD_LOCAL_RANK=2", "below the local size"}));
}

TEST(MPIEnvironment, RanksPerNodeMustBeTheDevicesPerNode) {
  // 4 ranks, 2 per node, but the Trainer thinks 4 devices on one node.
  EXPECT_TRUE(mentions(env_plan_error(layout("4", 1), open_mpi(3, 2, 2)),
                       {"2 rank(s) on this node", "devices=4", "--npernode 4", "num_nodes=2"}));
}

// ------------------------------------------------------------ torchrun inside SLURM

TEST(ClusterEnvironments, TorchrunInsideASlurmAllocationIsTorchelastic) {
  // salloc -N1 -n1, then torchrun --nproc-per-node 2: the allocation's SLURM_* variables
  // describe one task, torchrun's the two processes it started.
  const Vars vars = {{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NAME", "train"},  {"SLURM_NTASKS", "1"},
                     {"SLURM_PROCID", "0"},  {"SLURM_LOCALID", "0"},       {"SLURM_NODEID", "0"},
                     {"SLURM_NNODES", "1"},  {"SLURM_NODELIST", "n1"},     {"TORCHELASTIC_RUN_ID", "r"},
                     {"RANK", "1"},          {"LOCAL_RANK", "1"},          {"WORLD_SIZE", "2"},
                     {"GROUP_RANK", "0"},    {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}};
  const Plan p = env_plan(layout("2", 1), vars);
  EXPECT_EQ(p.cluster_env, "torchelastic");
  EXPECT_EQ(p.global_rank, 1);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.main_port, 29511);
  EXPECT_EQ(volt::environments::environment_names().front(), "torchelastic");
}

TEST(ClusterEnvironments, TorchrunStaticRendezvousJoinsTheAgentsStore) {
  // torchrun's default (static) rendezvous: its agent serves the store at MASTER_PORT.
  Vars vars = {{"TORCHELASTIC_RUN_ID", "none"},
               {"RANK", "0"},
               {"LOCAL_RANK", "0"},
               {"WORLD_SIZE", "2"},
               {"GROUP_RANK", "0"},
               {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", "29500"},
               {"TORCHELASTIC_USE_AGENT_STORE", "True"},
               {"TORCHELASTIC_RESTART_COUNT", "2"}};
  const Plan p = env_plan(layout("2", 1), vars);
  EXPECT_TRUE(p.launcher_store);
  EXPECT_EQ(p.store_prefix, "/worker/attempt_2");  // PyTorch's env:// prefix for that attempt
  EXPECT_NE(p.describe().find("the launcher's store"), std::string::npos) << p.describe();
  auto strategy = AcceleratorConnector(layout("2", 1), Environ(vars), cpu_cores(4)).create_strategy();
  EXPECT_TRUE(strategy->cluster_environment().joins_launcher_store());
  EXPECT_EQ(strategy->cluster_environment().store_prefix(), "/worker/attempt_2");
  // A c10d rendezvous (--standalone, --rdzv_backend c10d): the workers open their own.
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  const Plan own = env_plan(layout("2", 1), vars);
  EXPECT_FALSE(own.launcher_store);
  EXPECT_EQ(own.store_prefix, "");
}

// ------------------------------------------------------------ names in any case

TEST(RegistryNames, StrategyAcceleratorAndPrecisionMatchInAnyCase) {
  TrainerOptions o = layout("2", 1);
  o.accelerator = "CPU";
  o.strategy = "DDP";
  o.precision = "BF16-mixed";
  const Plan p = env_plan(o, {});
  EXPECT_EQ(p.accelerator, "cpu");
  EXPECT_EQ(p.strategy, "ddp");
  EXPECT_EQ(p.precision, "bf16-mixed");
  o.strategy = "DDP_Spawn_Find_Unused_Parameters_True";
  o.precision = "32-TRUE";
  const Plan spawn = env_plan(o, {});
  EXPECT_EQ(spawn.strategy, "ddp_spawn_find_unused_parameters_true");
  EXPECT_TRUE(spawn.find_unused_parameters);
  EXPECT_EQ(spawn.precision, "32-true");
  o.strategy = "Auto";
  o.accelerator = "AUTO";
  o.devices = "1";
  EXPECT_EQ(env_plan(o, {}).strategy, "single_device");
  // The legacy spelling keeps its warning, naming what was given.
  std::vector<std::string> warnings;
  EXPECT_EQ(volt::precision::normalize_precision("BF16", &warnings), "bf16-mixed");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(mentions(warnings[0], {"precision=BF16", "bf16-mixed"}));
  // Factories are found whatever the case.
  EXPECT_TRUE(static_cast<bool>(volt::strategies::strategy_factory("DDP")));
  EXPECT_TRUE(static_cast<bool>(volt::precision::precision_factory("Bf16-Mixed")));
}

TEST(RegistryNames, UnknownNamesAreReportedAsGivenWithTheKnownKeys) {
  TrainerOptions o = layout("2", 1);
  o.strategy = "DDPX";
  EXPECT_TRUE(mentions(env_plan_error(o, {}), {"strategy='DDPX'", "ddp_spawn", "single_device"}));
  o.strategy = "ddp";
  o.accelerator = "CPUS";
  EXPECT_TRUE(mentions(env_plan_error(o, {}), {"accelerator='CPUS'", "cpu", "cuda", "tpu"}));
  o.accelerator = "cpu";
  o.precision = "BF32-Mixed";
  EXPECT_TRUE(mentions(env_plan_error(o, {}), {"precision='BF32-Mixed'", "bf16-mixed", "32-true"}));
}

TEST(RegistryNames, RegistryTemplateMatchesKeysInAnyCase) {
  volt::Registry<int> registry("widget");
  registry.add("Fancy", "a fancy one", [] { return std::make_shared<int>(7); });
  EXPECT_TRUE(registry.contains("fancy"));
  EXPECT_TRUE(registry.contains("FANCY"));
  EXPECT_EQ(*registry.create("fAnCy"), 7);
  EXPECT_EQ(registry.known_keys(), "fancy");
  try {
    registry.create("plain");
    FAIL() << "an unknown key must throw";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(mentions(e.what(), {"widget='plain'", "fancy"}));
  }
}

// ------------------------------------------------------------ torchrun's error file

TEST(TorchelasticErrorFile, WritesTheElasticJsonShapeAtomically) {
  volt::testing::TempDir dir("volt_error_file");
  const std::string path = dir / "error.json";
  const volt::DataError error("the IDX file /nope/train-images-idx3-ubyte.gz cannot be opened");
  ASSERT_TRUE(volt::environments::record_torchelastic_error(error, "Trainer stage fit on global rank 1",
                                                            Environ({{"TORCHELASTIC_ERROR_FILE", path}})));
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  // The shape torch/distributed/elastic/multiprocessing/errors reads (ProcessFailure).
  ASSERT_TRUE(j.at("message").is_object());
  EXPECT_EQ(j["message"]["message"], std::string("DataError: ") + error.what());
  const std::string stack = j["message"]["extraInfo"]["py_callstack"];
  EXPECT_TRUE(mentions(stack, {"DataError", "/nope/train-images-idx3-ubyte.gz", "global rank 1"}));
  const std::string ts = j["message"]["extraInfo"]["timestamp"];
  EXPECT_GT(std::stoll(ts), 1700000000);
  // Only the file itself is left: the temporary one was renamed onto it.
  int64_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "error.json");
  }
  EXPECT_EQ(files, 1);
  // A second failure replaces the first (what the error handler of a Python worker does).
  ASSERT_TRUE(volt::environments::record_torchelastic_error(ConfigError("second"), "here",
                                                            Environ({{"TORCHELASTIC_ERROR_FILE", path}})));
  std::ifstream again(path);
  EXPECT_EQ(nlohmann::json::parse(again)["message"]["message"], "ConfigError: second");
}

TEST(TorchelasticErrorFile, NothingWithoutTheVariableAndNoThrowWhenUnwritable) {
  volt::testing::TempDir dir("volt_error_file");
  EXPECT_FALSE(volt::environments::record_torchelastic_error(ConfigError("x"), "here", Environ()));
  const std::string missing = dir / "no/such/folder/error.json";
  EXPECT_FALSE(volt::environments::record_torchelastic_error(ConfigError("x"), "here",
                                                             Environ({{"TORCHELASTIC_ERROR_FILE", missing}})));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(TorchelasticErrorFile, KindsAndInvalidUtf8) {
  EXPECT_EQ(volt::environments::error_kind(volt::DistributedError("x")), "DistributedError");
  EXPECT_EQ(volt::environments::error_kind(volt::CheckpointError("x")), "CheckpointError");
  EXPECT_EQ(volt::environments::error_kind(std::runtime_error("x")), "std::exception");
  const auto j = nlohmann::json::parse(
      volt::environments::torchelastic_error_json("Error", std::string("bad \xff name"), "here", 1));
  EXPECT_EQ(j["message"]["extraInfo"]["timestamp"], "1");
}

}  // namespace
