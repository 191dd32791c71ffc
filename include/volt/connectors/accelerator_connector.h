#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "volt/accelerators/hardware_probe.h"
#include "volt/core/environ.h"
#include "volt/core/trainer_options.h"
#include "volt/strategies/strategy.h"
#include "volt/strategies/strategy_registry.h"

namespace volt::connectors {

/// The resolved hardware stack: everything the flags, the environment and the hardware
/// turned into. A value: the Trainer builds its strategy stack from it and nothing else.
struct Plan {
  std::string accelerator;   ///< "cpu", "cuda", "tpu"
  std::string strategy;      ///< a registry name, e.g. "single_device", "ddp"
  std::string precision;     ///< normalised, e.g. "32-true"
  std::string cluster_env;   ///< "default", "torchelastic", "slurm", "lsf", "mpi", "kubeflow", "tpu"
  std::string launcher;      ///< "none", "subprocess", "spawn"
  int64_t num_nodes = 1;
  int64_t num_devices = 1;    ///< devices per node
  int64_t num_processes = 1;  ///< processes per node
  int64_t world_size = 1;
  int64_t global_rank = 0;
  int64_t local_rank = 0;
  int64_t node_rank = 0;
  std::vector<std::string> parallel_devices;  ///< e.g. {"cuda:0", "cuda:1"}, {"cpu", "cpu"}
  std::vector<int64_t> device_ids;             ///< logical ids
  std::string root_device;                     ///< this process's device
  std::string main_address;
  int main_port = 0;
  /// The launcher serves the rendezvous store at main_address:main_port (torchrun's static
  /// rendezvous): rank 0 joins it instead of opening it, under `store_prefix`.
  bool launcher_store = false;
  std::string store_prefix;
  bool processes_started_externally = false;  ///< by torchrun, srun, mpirun, ...
  bool find_unused_parameters = false;
  /// ddp family: backend ("gloo", "nccl"), timeouts, buckets.
  strategies::DDPOptions ddp;
  int64_t num_threads = 1;  ///< intra-op threads per process (CPU)
  bool async_checkpoint = false;  ///< write checkpoints in the background (AsyncCheckpointIO)
  std::string tpu_platform;  ///< "colab", "kaggle", "gce", "emulated", "unknown" on TPU hosts
  /// The TPU device runtime (accelerators::TpuRuntimeSpec::to_string), "none" if none.
  std::string tpu_runtime;
  /// What that runtime is, for people: the backend's name, devices, the setting used.
  std::string tpu_runtime_info;
  std::string hardware;      ///< where the hardware facts came from
  std::vector<std::string> warnings;

  /// A table, one fact per line (what `volt plan` and the example print).
  std::string describe() const;
  /// One JSON object with the keys above (what `volt plan --json` prints).
  std::string to_json() const;
};

/// Turns the Trainer's hardware flags (accelerator, devices, strategy, precision,
/// num_nodes, cluster_environment) with an environment snapshot and a hardware probe
/// into a Plan, in one ordered procedure (docs/hardware-plan.md), checking everything
/// before any process starts; then builds the Plan's strategy stack.
class AcceleratorConnector {
 public:
  /// This process's variables and this machine's hardware.
  explicit AcceleratorConnector(const TrainerOptions& options);
  AcceleratorConnector(const TrainerOptions& options, const Environ& env, const accelerators::HardwareProbe& probe);

  const Plan& plan() const { return plan_; }
  /// A fresh strategy with its accelerator, precision, environment and checkpoint IO, from
  /// the plan alone. Throws NotSupportedError when this build cannot train with it.
  std::shared_ptr<strategies::Strategy> create_strategy() const { return build_stack(plan_); }
  /// `precision`: a plug-in object to use instead of the plan's precision name.
  static std::shared_ptr<strategies::Strategy> build_stack(const Plan& plan,
                                                           std::shared_ptr<precision::Precision> precision = nullptr);

  /// The accelerator, strategy, precision and environment names, with descriptions.
  static std::string describe_registries();

 private:
  Plan plan_;
};

}  // namespace volt::connectors
