// The hardware plan: flags + an environment snapshot + a hardware probe -> Plan, for every
// rule of docs/hardware-plan.md. No test touches the process environment or needs hardware:
// each builds its Environ and HardwareProbe by hand.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "volt/accelerators/devices.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/core/error.h"
#include "volt/core/tpu_topology.h"
#include "volt/environments/environment_registry.h"
#include "volt/environments/slurm_environment.h"
#include "volt/environments/kubeflow_environment.h"
#include "volt/environments/lsf_environment.h"
#include "volt/environments/mpi_environment.h"
#include "volt/environments/torchelastic_environment.h"
#include "volt/environments/xla_environment.h"
#include "volt/precision/precision_registry.h"
#include "volt/strategies/strategy_registry.h"
#include "support/expect.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::Environ;
using volt::TrainerOptions;
using volt::accelerators::DevicesSpec;
using volt::accelerators::HardwareProbe;
using volt::connectors::AcceleratorConnector;
using volt::connectors::Plan;

using Vars = std::map<std::string, std::string>;

HardwareProbe cpu_only() {
  HardwareProbe p = HardwareProbe::assume("cpu", Environ());
  p.cpu_cores = 4;
  return p;
}
HardwareProbe gpus(int64_t n, bool bf16 = true) {
  HardwareProbe p = HardwareProbe::assume("cuda=" + std::to_string(n), Environ());
  p.cuda_bf16 = bf16;
  return p;
}
HardwareProbe tpu(const std::string& spec) { return HardwareProbe::assume("tpu=" + spec, Environ()); }

struct Flags {
  std::string accelerator = "auto", devices = "auto", strategy = "auto", precision = "32-true";
  int64_t num_nodes = 1;
  std::string cluster_environment = "auto";
  std::string process_group_backend = "auto";
};

TrainerOptions options(const Flags& f) {
  TrainerOptions o;
  o.accelerator = f.accelerator;
  o.devices = f.devices;
  o.strategy = f.strategy;
  o.precision = f.precision;
  o.num_nodes = f.num_nodes;
  o.cluster_environment = f.cluster_environment;
  o.process_group_backend = f.process_group_backend;
  return o;
}

Plan plan(const Flags& f, const HardwareProbe& hw, const Vars& vars = {}) {
  return AcceleratorConnector(options(f), Environ(vars), hw).plan();
}

/// The strategy stack the connector builds for these flags.
std::shared_ptr<volt::strategies::Strategy> stack(const Flags& f, const HardwareProbe& hw, const Vars& vars = {}) {
  return AcceleratorConnector(options(f), Environ(vars), hw).create_strategy();
}

/// The message of the volt::Error the plan throws ("" if none).
std::string plan_error(const Flags& f, const HardwareProbe& hw, const Vars& vars = {}) {
  try {
    plan(f, hw, vars);
  } catch (const volt::Error& e) {
    return e.what();
  }
  return "";
}

using volt::testing::mentions;

// ------------------------------------------------------------ devices grammar

TEST(DevicesSpec, ParsesLightningsForms) {
  EXPECT_EQ(DevicesSpec::parse("auto").kind, DevicesSpec::Kind::kAuto);
  EXPECT_EQ(DevicesSpec::parse("-1").kind, DevicesSpec::Kind::kAll);
  EXPECT_EQ(DevicesSpec::parse("3").count, 3);
  EXPECT_EQ(DevicesSpec::parse("0,1").ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(DevicesSpec::parse("[0, 2]").ids, (std::vector<int64_t>{0, 2}));
  const auto one = DevicesSpec::parse("2,");
  EXPECT_EQ(one.kind, DevicesSpec::Kind::kIds);
  EXPECT_EQ(one.ids, (std::vector<int64_t>{2}));
}

TEST(DevicesSpec, RejectsNoDevicesAndGarbageBeforeAnyHardwareCheck) {
  for (const std::string bad : {"0", "", "[]", "abc", "1.5", "0,0", "-2"}) {
    EXPECT_THROW(DevicesSpec::parse(bad), ConfigError) << bad;
  }
  // Even on a machine with GPUs, devices=0 fails for what it is, not for the hardware.
  EXPECT_TRUE(mentions(plan_error({.devices = "0"}, gpus(8)), {"devices=0", "no device"}));
}

// ------------------------------------------------------------ accelerator choice

TEST(AcceleratorChoice, AutoPrefersTpuThenCudaThenCpu) {
  EXPECT_EQ(plan({}, tpu("v3-8")).accelerator, "tpu");
  EXPECT_EQ(plan({}, gpus(2)).accelerator, "cuda");
  EXPECT_EQ(plan({}, cpu_only()).accelerator, "cpu");
}

TEST(AcceleratorChoice, GpuIsCuda) { EXPECT_EQ(plan({.accelerator = "gpu", .devices = "1"}, gpus(2)).accelerator, "cuda"); }

TEST(AcceleratorChoice, MissingExplicitAcceleratorIsAnErrorNeverAFallback) {
  EXPECT_TRUE(mentions(plan_error({.accelerator = "gpu"}, cpu_only()), {"accelerator='gpu'", "cpu"}));
  EXPECT_TRUE(mentions(plan_error({.accelerator = "cuda"}, tpu("v3-8")), {"accelerator='cuda'"}));
  EXPECT_TRUE(mentions(plan_error({.accelerator = "tpu"}, gpus(4)),
                       {"accelerator='tpu'", "TPU_ACCELERATOR_TYPE", "/dev/accel", "libtpu"}));
}

TEST(AcceleratorChoice, UnknownNameListsTheKnownOnes) {
  EXPECT_TRUE(mentions(plan_error({.accelerator = "npu"}, cpu_only()), {"npu", "cpu", "cuda", "tpu"}));
}

// ------------------------------------------------------------ devices per accelerator

TEST(DevicesOnCpu, CountsProcessesAndRejectsIdsAndAll) {
  const Plan p = plan({.devices = "3", .strategy = "ddp"}, cpu_only());
  EXPECT_EQ(p.num_devices, 3);
  EXPECT_EQ(p.parallel_devices, (std::vector<std::string>{"cpu", "cpu", "cpu"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "-1"}, cpu_only()), {"devices=-1", "process"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "0,1"}, cpu_only()), {"list of device ids", "devices=2"}));
  EXPECT_EQ(plan({.devices = "auto"}, cpu_only()).num_devices, 1);
}

TEST(DevicesOnCuda, CountsListsAllAndOutOfRangeIds) {
  EXPECT_EQ(plan({.devices = "-1"}, gpus(4)).num_devices, 4);
  EXPECT_EQ(plan({.devices = "auto"}, gpus(4)).num_devices, 4);
  const Plan listed = plan({.devices = "1,3"}, gpus(4));
  EXPECT_EQ(listed.device_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(listed.parallel_devices, (std::vector<std::string>{"cuda:1", "cuda:3"}));
  const Plan single = plan({.devices = "2,"}, gpus(4));
  EXPECT_EQ(single.parallel_devices, (std::vector<std::string>{"cuda:2"}));
  EXPECT_EQ(single.strategy, "single_device");
  EXPECT_TRUE(mentions(plan_error({.devices = "0,3"}, gpus(2)), {"cuda:3", "2 visible GPUs", "ids 0 to 1"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "5"}, gpus(2)), {"5 GPUs", "2 visible GPUs"}));
}

TEST(DevicesOnTpu, OneOrAllOfTheHostOrOneListedCore) {
  EXPECT_EQ(plan({.devices = "8"}, tpu("v3-8")).num_devices, 8);
  EXPECT_EQ(plan({.devices = "1"}, tpu("v3-8")).strategy, "single_xla");
  EXPECT_EQ(plan({.devices = "5,"}, tpu("v3-8")).root_device, "xla:5");
  EXPECT_TRUE(mentions(plan_error({.devices = "4"}, tpu("v3-8")), {"devices=1 or devices=8"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "0,1"}, tpu("v3-8")), {"one device"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "9,"}, tpu("v3-8")), {"devices 0 to 7"}));
}

TEST(TpuTopology, DevicesPerHostFollowTheAcceleratorType) {
  const std::vector<std::tuple<std::string, int64_t, int64_t>> table = {
      {"v2-8", 8, 1}, {"v3-8", 8, 1}, {"v3-32", 8, 4}, {"v4-8", 4, 1}, {"v4-32", 4, 4},
      {"v5p-8", 4, 1}, {"v5litepod-8", 8, 1}, {"v5e-4", 4, 1}, {"v5litepod-16", 4, 4}, {"v6e-8", 8, 1}};
  for (const auto& [type, per_host, hosts] : table) {
    const auto t = volt::parse_tpu_accelerator_type(type);
    EXPECT_EQ(t.devices_per_host, per_host) << type;
    EXPECT_EQ(t.num_hosts, hosts) << type;
  }
  EXPECT_THROW(volt::parse_tpu_accelerator_type("v9-8"), ConfigError);
  EXPECT_THROW(volt::parse_tpu_accelerator_type("tpu8"), ConfigError);
  // Overridable.
  const auto host = volt::describe_tpu_host(Environ(Vars{{"TPU_ACCELERATOR_TYPE", "v4-8"},
                                                     {"VOLT_TPU_DEVICES_PER_HOST", "2"}}),
                                            false);
  EXPECT_EQ(host.topology.devices_per_host, 2);
}

TEST(TpuDetection, FindsVariablesDeviceFilesAndLibtpu) {
  EXPECT_FALSE(volt::describe_tpu_host(Environ(), false).present);
  EXPECT_TRUE(volt::describe_tpu_host(Environ(Vars{{"PJRT_DEVICE", "TPU"}}), false).present);
  EXPECT_FALSE(volt::describe_tpu_host(Environ(Vars{{"PJRT_DEVICE", "CPU"}}), false).present);
  const fs::path root = fs::temp_directory_path() / ("volt_tpu_root_" + std::to_string(::getpid()));
  fs::create_directories(root / "dev" / "vfio");
  fs::create_directories(root / "opt" / "lib");
  EXPECT_EQ(volt::accelerators::TPUAccelerator::probe_files(Environ(), root.string()), "");
  std::ofstream(root / "dev" / "accel0").put('x');
  std::ofstream(root / "dev" / "vfio" / "0").put('x');
  std::ofstream(root / "opt" / "lib" / "libtpu.so").put('x');
  const std::string found =
      volt::accelerators::TPUAccelerator::probe_files(Environ(Vars{{"LD_LIBRARY_PATH", "/nowhere:/opt/lib"}}), root.string());
  EXPECT_TRUE(mentions(found, {"/dev/accel", "/dev/vfio", "libtpu.so in /opt/lib"}));
  const auto host = volt::accelerators::TPUAccelerator::probe(Environ(), root.string());
  EXPECT_TRUE(host.present);
  fs::remove_all(root);
}

TEST(TpuDetection, TellsColabKaggleAndCloudTpuVmsApart) {
  const auto colab = volt::describe_tpu_host(Environ(Vars{{"COLAB_TPU_ADDR", "10.0.0.2:8470"}}), false);
  EXPECT_EQ(colab.platform, "colab");
  EXPECT_EQ(colab.topology.accelerator_type, "v2-8");
  EXPECT_EQ(colab.topology.devices_per_host, 8);
  const auto kaggle =
      volt::describe_tpu_host(Environ(Vars{{"KAGGLE_KERNEL_RUN_TYPE", "Interactive"}, {"TPU_NAME", "local"}}), false);
  EXPECT_EQ(kaggle.platform, "kaggle");
  EXPECT_EQ(kaggle.topology.accelerator_type, "v3-8");
  const auto gce = volt::describe_tpu_host(Environ(Vars{{"TPU_ACCELERATOR_TYPE", "v4-32"},
                                                    {"TPU_WORKER_ID", "2"},
                                                    {"TPU_WORKER_HOSTNAMES", "t0,t1,t2,t3"}}),
                                           false);
  EXPECT_EQ(gce.platform, "gce");
  EXPECT_EQ(gce.worker_id, 2);
  // A Cloud TPU VM pod: 4 hosts x 4 chips, this is host 2.
  const Plan p = plan({.num_nodes = 4}, [&] {
    HardwareProbe hw = cpu_only();
    hw.tpu = gce;
    return hw;
  }());
  EXPECT_EQ(p.cluster_env, "tpu");
  EXPECT_EQ(p.tpu_platform, "gce");
  EXPECT_EQ(p.strategy, "xla");
  EXPECT_EQ(p.launcher, "spawn");
  EXPECT_EQ(p.world_size, 16);
  EXPECT_EQ(p.node_rank, 2);
  EXPECT_EQ(p.global_rank, 8);
  EXPECT_EQ(p.main_address, "t0");
}

// ------------------------------------------------------------ strategies

TEST(StrategyChoice, AutoFollowsDevicesNodesAndAccelerator) {
  struct Row {
    Flags flags;
    HardwareProbe hw;
    std::string strategy, launcher;
    int64_t world;
  };
  const std::vector<Row> rows = {
      {{}, cpu_only(), "single_device", "none", 1},
      {{.devices = "2"}, cpu_only(), "ddp", "subprocess", 2},
      {{.devices = "1"}, gpus(4), "single_device", "none", 1},
      {{.devices = "4"}, gpus(4), "ddp", "subprocess", 4},
      {{.devices = "1", .num_nodes = 2}, gpus(4), "ddp", "subprocess", 2},
      {{.devices = "1"}, tpu("v3-8"), "single_xla", "none", 1},
      {{}, tpu("v3-8"), "xla", "spawn", 8},
  };
  for (const auto& r : rows) {
    const Plan p = plan(r.flags, r.hw);
    EXPECT_EQ(p.strategy, r.strategy) << r.flags.devices;
    EXPECT_EQ(p.launcher, r.launcher) << r.flags.devices;
    EXPECT_EQ(p.world_size, r.world) << r.flags.devices;
  }
}

TEST(StrategyChoice, EveryLightningNameResolvesWithItsLauncher) {
  const std::vector<std::tuple<std::string, std::string, bool>> table = {
      {"ddp", "subprocess", false},
      {"ddp_find_unused_parameters_true", "subprocess", true},
      {"ddp_find_unused_parameters_false", "subprocess", false},
      {"ddp_spawn", "spawn", false},
      {"ddp_spawn_find_unused_parameters_true", "spawn", true},
  };
  for (const auto& [name, launcher, unused] : table) {
    const Plan p = plan({.devices = "2", .strategy = name}, cpu_only());
    EXPECT_EQ(p.strategy, name);
    EXPECT_EQ(p.launcher, launcher) << name;
    EXPECT_EQ(p.find_unused_parameters, unused) << name;
  }
  const Plan dp = plan({.devices = "4", .strategy = "dp"}, gpus(4));
  EXPECT_EQ(dp.num_processes, 1);
  EXPECT_EQ(dp.world_size, 1);
  EXPECT_EQ(dp.root_device, "cuda:0");
  EXPECT_EQ(plan({.strategy = "xla"}, tpu("v2-8")).launcher, "spawn");
}

TEST(StrategyChoice, MismatchesFailEarlyWithAFix) {
  EXPECT_TRUE(mentions(plan_error({.strategy = "foo"}, cpu_only()), {"foo", "ddp_spawn", "single_xla"}));
  EXPECT_TRUE(mentions(plan_error({.strategy = "xla"}, gpus(2)), {"xla", "tpu"}));
  EXPECT_TRUE(mentions(plan_error({.strategy = "ddp"}, tpu("v3-8")), {"ddp", "xla"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .strategy = "single_device"}, gpus(2)),
                       {"single_device", "one process", "devices=1"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .strategy = "dp", .num_nodes = 2}, gpus(2)), {"num_nodes=2", "ddp"}));
  EXPECT_TRUE(mentions(plan_error({.num_nodes = 0}, cpu_only()), {"num_nodes=0"}));
}

TEST(StrategyChoice, DataParallelOnCpuRunsDdpWithAWarning) {
  const Plan p = plan({.devices = "2", .strategy = "dp"}, cpu_only());
  EXPECT_EQ(p.strategy, "ddp");
  EXPECT_EQ(p.world_size, 2);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_TRUE(mentions(p.warnings[0], {"dp", "CUDA", "ddp"}));
}

TEST(StrategyChoice, ACommHookOnAStrategyOutsideTheDdpFamilyWarnsThatItHasNoEffect) {
  TrainerOptions o = options({.devices = "1"});
  o.ddp_comm_hook = "fp16";
  const Plan single = AcceleratorConnector(o, Environ(), cpu_only()).plan();
  EXPECT_EQ(single.strategy, "single_device");
  ASSERT_EQ(single.warnings.size(), 1u);
  EXPECT_TRUE(mentions(single.warnings[0], {"ddp.comm_hook='fp16'", "no effect", "single_device", "strategy='ddp'"}));
  o = options({.devices = "2", .strategy = "ddp"});
  o.ddp_comm_hook = "fp16";
  EXPECT_TRUE(AcceleratorConnector(o, Environ(), cpu_only()).plan().warnings.empty());
  o.strategy = "ddp_spawn";
  EXPECT_TRUE(AcceleratorConnector(o, Environ(), cpu_only()).plan().warnings.empty());
}

TEST(ProcessGroupBackend, ResolvesAutoAndRefusesNcclWithoutCuda) {
  EXPECT_EQ(plan({.devices = "2", .strategy = "ddp"}, cpu_only()).ddp.backend, "gloo");
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .strategy = "ddp", .process_group_backend = "nccl"}, cpu_only()),
                       {"process_group_backend='nccl'", "CUDA", "gloo"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .strategy = "ddp", .process_group_backend = "mpi"}, cpu_only()),
                       {"'mpi'", "auto, gloo or nccl"}));
}

TEST(ProcessGroupBackend, CpuRanksShareTheCoresAndTooManyRanksWarn) {
  const Plan p = plan({.devices = "2", .strategy = "ddp"}, cpu_only());  // 4 cores
  EXPECT_EQ(p.num_threads, 2);
  EXPECT_TRUE(p.warnings.empty());
  TrainerOptions o = options({.devices = "8", .strategy = "ddp"});
  o.allow_cpu_oversubscription = true;
  const Plan many = AcceleratorConnector(o, Environ(), cpu_only()).plan();
  EXPECT_EQ(many.num_threads, 1);
  ASSERT_FALSE(many.warnings.empty());
  EXPECT_TRUE(mentions(many.warnings.back(), {"8 processes", "4 CPU core"}));
}

TEST(ProcessGroupBackend, MoreCpuRanksThanCoresNeedTheOptIn) {
  EXPECT_TRUE(mentions(plan_error({.devices = "8", .strategy = "ddp"}, cpu_only()),
                       {"devices=8", "4 core", "allow_cpu_oversubscription"}));
  // A launcher's processes already exist: they are not refused.
  const Plan launched = plan({.devices = "8", .strategy = "ddp"}, cpu_only(),
                             {{"TORCHELASTIC_RUN_ID", "x"}, {"WORLD_SIZE", "8"}, {"RANK", "0"}, {"LOCAL_RANK", "0"},
                              {"LOCAL_WORLD_SIZE", "8"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(launched.num_processes, 8);
}

TEST(PlanToStack, DdpBuildsWithTheRanksOfThePlan) {
  auto strategy = stack({.devices = "2", .strategy = "ddp"}, cpu_only(),
                        {{"RANK", "1"},
                         {"WORLD_SIZE", "2"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", "29555"}});
  EXPECT_EQ(strategy->name(), "ddp");
  EXPECT_EQ(strategy->world_size(), 2);
  EXPECT_EQ(strategy->global_rank(), 1);
  EXPECT_EQ(strategy->local_rank(), 1);
  EXPECT_EQ(strategy->launcher_kind(), volt::strategies::LauncherKind::kSubprocess);
}

// ------------------------------------------------------------ precision

TEST(PrecisionFlags, NormalisedInOnePlace) {
  std::vector<std::string> warnings;
  EXPECT_EQ(volt::precision::normalize_precision("32", &warnings), "32-true");
  EXPECT_EQ(volt::precision::normalize_precision("64", &warnings), "64-true");
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(volt::precision::normalize_precision("16", &warnings), "16-mixed");
  EXPECT_EQ(volt::precision::normalize_precision("bf16", &warnings), "bf16-mixed");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(mentions(warnings[0], {"legacy", "16-mixed"}));
  for (const std::string ok : {"32-true", "64-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true"}) {
    EXPECT_EQ(volt::precision::normalize_precision(ok), ok);
  }
  EXPECT_TRUE(mentions(plan_error({.precision = "8-true"}, cpu_only()), {"8-true", "bf16-mixed", "16-true"}));
}

TEST(PrecisionFlags, WhatEachAcceleratorAccepts) {
  const Plan cpu16 = plan({.precision = "16-mixed"}, cpu_only());
  EXPECT_EQ(cpu16.precision, "bf16-mixed");
  ASSERT_EQ(cpu16.warnings.size(), 1u);
  EXPECT_TRUE(mentions(cpu16.warnings[0], {"16-mixed", "bf16-mixed", "CPU"}));
  EXPECT_EQ(plan({.precision = "16-mixed"}, gpus(1)).precision, "16-mixed");
  EXPECT_TRUE(mentions(plan_error({.precision = "16-mixed"}, tpu("v3-8")), {"TPU", "32-true, bf16-true"}));
  EXPECT_TRUE(mentions(plan_error({.precision = "bf16-mixed"}, tpu("v3-8")), {"TPU", "32-true, bf16-true"}));
  EXPECT_EQ(plan({.precision = "bf16-true"}, tpu("v3-8")).precision, "bf16-true");
  EXPECT_TRUE(mentions(plan_error({.precision = "64-true"}, tpu("v3-8")), {"float64"}));
  EXPECT_TRUE(mentions(plan_error({.precision = "bf16-mixed"}, gpus(1, /*bf16=*/false)), {"bfloat16", "8.0"}));
  EXPECT_EQ(plan({.precision = "bf16"}, gpus(1)).warnings.size(), 1u);  // the legacy spelling's warning
}

// ------------------------------------------------------------ cluster environments

TEST(ClusterEnvironments, DetectionOrderIsDocumented) {
  EXPECT_EQ(volt::environments::environment_names(),
            (std::vector<std::string>{"torchelastic", "slurm", "kubeflow", "lsf", "mpi", "tpu", "default"}));
  const Vars slurm = {{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"}};
  Vars both = slurm;
  for (const auto& kv : Vars{{"TORCHELASTIC_RUN_ID", "x"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                             {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}}) {
    both.insert(kv);
  }
  EXPECT_EQ(plan({.devices = "2"}, cpu_only(), both).cluster_env, "torchelastic");  // torchrun inside SLURM
  EXPECT_EQ(plan({.devices = "2"}, cpu_only(), slurm).cluster_env, "slurm");
  Vars interactive = slurm;
  interactive["SLURM_JOB_NAME"] = "bash";  // an interactive srun shell is not a job
  EXPECT_EQ(plan({.devices = "2"}, cpu_only(), interactive).cluster_env, "default");
  TrainerOptions no_slurm = options({.devices = "2"});
  no_slurm.slurm_auto_detect = false;
  EXPECT_EQ(AcceleratorConnector(no_slurm, Environ(slurm), cpu_only()).plan().cluster_env, "default");
}

TEST(ClusterEnvironments, TorchrunVariablesGiveRanks) {
  const Vars vars = {{"TORCHELASTIC_RUN_ID", "abc"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                     {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.1.1.1"}, {"MASTER_PORT", "29400"}};
  const Plan p = plan({.devices = "2", .num_nodes = 2}, gpus(2), vars);
  EXPECT_EQ(p.cluster_env, "torchelastic");
  EXPECT_EQ(p.launcher, "none");
  EXPECT_TRUE(p.processes_started_externally);
  EXPECT_EQ(p.global_rank, 3);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.node_rank, 1);
  EXPECT_EQ(p.root_device, "cuda:1");
  EXPECT_EQ(p.main_address, "10.1.1.1");
  EXPECT_EQ(p.main_port, 29400);
  // The world the launcher made must be the one the flags describe.
  EXPECT_TRUE(mentions(plan_error({.devices = "4", .num_nodes = 2}, gpus(4), vars), {"started 4", "world of 8"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .strategy = "ddp_spawn", .num_nodes = 2}, gpus(2), vars),
                       {"ddp_spawn", "spawns", "ddp"}));
}

TEST(ClusterEnvironments, DefaultEnvironmentChecksTorchrunVariables) {
  EXPECT_TRUE(mentions(plan_error({}, cpu_only(), {{"RANK", "1"}}), {"RANK=1", "WORLD_SIZE is not"}));
  EXPECT_TRUE(mentions(plan_error({}, cpu_only(), {{"WORLD_SIZE", "2"}}), {"WORLD_SIZE=2", "RANK is not"}));
  EXPECT_TRUE(mentions(plan_error({}, cpu_only(), {{"MASTER_PORT", "70000"}}), {"MASTER_PORT=70000", "1-65535"}));
  EXPECT_TRUE(mentions(plan_error({}, cpu_only(), {{"MASTER_PORT", "http"}}), {"MASTER_PORT", "http"}));
  // Without MASTER_PORT a free port is picked for jobs Volt launches.
  const Plan p = plan({.devices = "2"}, cpu_only());
  EXPECT_GT(p.main_port, 0);
  EXPECT_EQ(plan({}, cpu_only(), {{"MASTER_PORT", "12345"}}).main_port, 12345);
  // Plain variables from any launcher (no TORCHELASTIC_RUN_ID).
  const Plan manual = plan({.devices = "2"}, cpu_only(), {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(manual.cluster_env, "default");
  EXPECT_EQ(manual.global_rank, 1);
  EXPECT_EQ(manual.launcher, "none");
}

TEST(ClusterEnvironments, MultiNodeWithoutASchedulerWarnsAndChecksTheNodeRank) {
  const Plan node1 = plan({.devices = "2", .num_nodes = 2}, cpu_only(), {{"NODE_RANK", "1"}, {"MASTER_ADDR", "n0"}});
  EXPECT_EQ(node1.node_rank, 1);
  EXPECT_EQ(node1.global_rank, 2);
  ASSERT_EQ(node1.warnings.size(), 1u);
  EXPECT_TRUE(mentions(node1.warnings[0], {"NODE_RANK", "MASTER_ADDR", "n0"}));
  EXPECT_TRUE(mentions(plan_error({.num_nodes = 2}, cpu_only(), {{"NODE_RANK", "2"}}), {"node rank 2", "num_nodes=2"}));
}

TEST(ClusterEnvironments, SlurmNodeListsRanksAndTaskCounts) {
  EXPECT_EQ(volt::environments::expand_slurm_nodelist("node[1-3,7]"),
            (std::vector<std::string>{"node1", "node2", "node3", "node7"}));
  EXPECT_EQ(volt::environments::expand_slurm_nodelist("gpu[01-02],login"),
            (std::vector<std::string>{"gpu01", "gpu02", "login"}));
  EXPECT_THROW(volt::environments::expand_slurm_nodelist("node[1-3"), ConfigError);
  EXPECT_THROW(volt::environments::expand_slurm_nodelist("node[3-1]"), ConfigError);
  const Vars job = {{"SLURM_NTASKS", "8"},          {"SLURM_PROCID", "5"},      {"SLURM_LOCALID", "1"},
                    {"SLURM_NODEID", "1"},          {"SLURM_NODELIST", "gpu[03-04]"}, {"SLURM_JOB_ID", "987654"},
                    {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_NNODES", "2"}};
  const Plan p = plan({.devices = "4", .num_nodes = 2}, gpus(4), job);
  EXPECT_EQ(p.cluster_env, "slurm");
  EXPECT_EQ(p.global_rank, 5);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.node_rank, 1);
  EXPECT_EQ(p.main_address, "gpu03");
  EXPECT_EQ(p.main_port, 15000 + 7654);
  // A job script that disagrees with the Trainer fails at once instead of hanging.
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .num_nodes = 2}, gpus(4), job),
                       {"SLURM_NTASKS_PER_NODE=4", "devices=2", "--ntasks-per-node=2"}));
  EXPECT_TRUE(mentions(plan_error({.devices = "4", .num_nodes = 4}, gpus(4), job),
                       {"SLURM_NNODES=2", "num_nodes=4", "--nodes=4"}));
  Vars missing = job;
  missing.erase("SLURM_PROCID");
  EXPECT_TRUE(mentions(plan_error({.devices = "4", .num_nodes = 2}, gpus(4), missing), {"SLURM_PROCID", "srun"}));
  // Array jobs requeue only their own task.
  Vars array = job;
  array["SLURM_ARRAY_JOB_ID"] = "555";
  array["SLURM_ARRAY_TASK_ID"] = "7";
  EXPECT_EQ(volt::environments::SLURMEnvironment(Environ(array)).job_id(), "555_7");
  volt::environments::SLURMEnvironment::Options o;
  o.requeue_signal = "SIGUSR2";
  EXPECT_EQ(volt::environments::SLURMEnvironment(Environ(job), o).options().requeue_signal, "SIGUSR2");
}

TEST(ClusterEnvironments, KubeflowLsfAndMpi) {
  const Vars kubeflow = {{"KUBERNETES_PORT", "tcp://10.0.0.1:443"}, {"MASTER_ADDR", "job-master-0"},
                         {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "3"}, {"RANK", "2"}};
  const Plan k = plan({.devices = "1", .num_nodes = 3}, gpus(1), kubeflow);
  EXPECT_EQ(k.cluster_env, "kubeflow");
  EXPECT_EQ(k.global_rank, 2);
  EXPECT_EQ(k.node_rank, 2);
  EXPECT_EQ(k.local_rank, 0);
  EXPECT_EQ(k.main_address, "job-master-0");
  // Chosen explicitly, it needs its variables.
  EXPECT_TRUE(mentions(plan_error({.cluster_environment = "kubeflow"}, cpu_only()), {"Kubeflow", "WORLD_SIZE"}));

  const fs::path rankfile = fs::temp_directory_path() / ("volt_lsf_rankfile_" + std::to_string(::getpid()));
  std::ofstream(rankfile) << "batch01\nnodeA\nnodeA\nnodeB\nnodeB\n";
  const Vars lsf = {{"LSB_JOBID", "4242"}, {"LSB_DJOB_RANKFILE", rankfile.string()}, {"JSM_NAMESPACE_SIZE", "4"},
                    {"JSM_NAMESPACE_RANK", "3"}, {"JSM_NAMESPACE_LOCAL_RANK", "1"}, {"HOSTNAME", "nodeB"}};
  const Plan l = plan({.devices = "2", .num_nodes = 2}, gpus(2), lsf);
  EXPECT_EQ(l.cluster_env, "lsf");
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.global_rank, 3);
  EXPECT_EQ(l.main_address, "nodeA");
  EXPECT_EQ(l.main_port, 10000 + 4242 % 1000);
  fs::remove(rankfile);

  const Vars ompi = {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "m0"}};
  const Plan m = plan({.devices = "2", .num_nodes = 2}, cpu_only(), ompi);
  EXPECT_EQ(m.cluster_env, "mpi");
  EXPECT_EQ(m.node_rank, 1);
  EXPECT_EQ(m.global_rank, 2);
  Vars no_addr = ompi;
  no_addr.erase("MASTER_ADDR");
  EXPECT_TRUE(mentions(plan_error({.devices = "2", .num_nodes = 2}, cpu_only(), no_addr), {"MASTER_ADDR", "mpirun"}));
  const Plan pmi = plan({.devices = "2"}, cpu_only(), {{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}});
  EXPECT_EQ(pmi.cluster_env, "mpi");
  EXPECT_EQ(pmi.global_rank, 1);
  EXPECT_EQ(pmi.main_address, "127.0.0.1");
  EXPECT_TRUE(mentions(plan_error({}, cpu_only(), {{"PMIX_RANK", "0"}}), {"PMIX_RANK", "PMI_SIZE"}));
}

TEST(ClusterEnvironments, UnknownChoiceListsTheKnownOnes) {
  EXPECT_TRUE(mentions(plan_error({.cluster_environment = "pbs"}, cpu_only()), {"pbs", "slurm", "kubeflow"}));
}

// ------------------------------------------------------------ the stack built from a plan

TEST(PlanToStack, SingleDeviceCpuBuildsAndOthersSayWhatIsMissing) {
  auto strategy = stack({}, cpu_only());
  EXPECT_EQ(strategy->name(), "single_device");
  EXPECT_TRUE(strategy->root_device().is_cpu());
  EXPECT_EQ(strategy->cluster_environment().name(), "default");
  try {
    stack({}, tpu("v3-8"));
    FAIL() << "an xla plan built a stack without a TPU runtime";
  } catch (const volt::Error& e) {
    EXPECT_TRUE(mentions(e.what(), {"xla"}));
  }
}

TEST(PlanOutput, TableAndJsonCarryEveryKey) {
  const Plan p = plan({.devices = "2"}, gpus(2));
  const std::string json = p.to_json();
  for (const std::string key : {"accelerator", "strategy", "precision", "cluster_env", "launcher", "num_nodes",
                                "num_devices", "num_processes", "world_size", "global_rank", "local_rank", "node_rank",
                                "parallel_devices", "device_ids", "root_device", "main_address", "main_port",
                                "warnings"}) {
    EXPECT_NE(json.find("\"" + key + "\":"), std::string::npos) << key << " missing in " << json;
  }
  EXPECT_NE(json.find("[\"cuda:0\",\"cuda:1\"]"), std::string::npos) << json;
  const std::string table = p.describe();
  for (const std::string word : {"cuda", "ddp", "subprocess", "world_size", "cuda:0, cuda:1"}) {
    EXPECT_NE(table.find(word), std::string::npos) << word << " missing in\n" << table;
  }
  EXPECT_NE(json.find("\"checkpoint_io\":\"torch\""), std::string::npos) << json;
}

TEST(HardwareProbe, AssumeReplacesTheProbe) {
  EXPECT_EQ(HardwareProbe::assume("cuda=8", Environ()).cuda_devices, 8);
  EXPECT_EQ(HardwareProbe::assume("gpu=2", Environ()).cuda_devices, 2);
  EXPECT_EQ(HardwareProbe::assume("tpu=8", Environ()).tpu.topology.devices_per_host, 8);
  EXPECT_EQ(HardwareProbe::assume("tpu=v4-8", Environ()).tpu.topology.devices_per_host, 4);
  for (const std::string bad : {"cuda", "cuda=0", "cuda=x", "npu=2", "tpu=v9-8", ""}) {
    EXPECT_THROW(HardwareProbe::assume(bad, Environ()), ConfigError) << bad;
  }
}

}  // namespace
