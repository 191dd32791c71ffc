#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "volt/accelerators/accelerator.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/core/environ.h"
#include "volt/core/trainer_options.h"
#include "volt/environments/cluster_environment.h"
#include "volt/precision/precision.h"
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
  /// strategy "fsdp": sharding strategy and wrap policy.
  strategies::FSDPOptions fsdp;
  int64_t num_threads = 1;  ///< intra-op threads per process (CPU)
  /// How checkpoints are written: a checkpoint_io registry name ("torch", "async", ...), or
  /// "object" for a CheckpointIO passed in the Trainer's plugins.
  std::string checkpoint_io = "torch";
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

/// Plug-in objects given to the Trainer instead of names (Lightning's Trainer(accelerator=<obj>,
/// strategy=<obj>, plugins=[...])), sorted by kind. The connector uses each in place of the
/// option it stands for, and refuses conflicting choices, naming both.
struct PluginObjects {
  std::shared_ptr<accelerators::Accelerator> accelerator;
  /// A strategy the user built (e.g. DDPStrategy(ddp_options)); its unset parts are connected.
  std::shared_ptr<strategies::Strategy> strategy;
  std::vector<std::shared_ptr<environments::ClusterEnvironment>> environments;
  std::vector<std::shared_ptr<precision::Precision>> precisions;
  std::vector<std::shared_ptr<checkpoint_io::CheckpointIO>> checkpoint_ios;
};

/// Turns the Trainer's hardware flags (accelerator, devices, strategy, precision,
/// num_nodes, cluster_environment, checkpoint_io) and plug-in objects, with an environment
/// snapshot and a hardware probe, into a Plan, in one ordered procedure
/// (docs/hardware-plan.md), checking everything before any process starts; then builds the
/// Plan's strategy stack. Every part is found through its registry (accelerator_registry,
/// strategy_registry, precision_registry, environment_registry, checkpoint_io_registry) or
/// taken from `plugins`. The accelerator is built here, once (a TPU's runtime is opened once).
class AcceleratorConnector {
 public:
  /// This process's variables and this machine's hardware.
  explicit AcceleratorConnector(const TrainerOptions& options, PluginObjects plugins = {});
  AcceleratorConnector(const TrainerOptions& options, const Environ& env, const accelerators::HardwareProbe& probe,
                       PluginObjects plugins = {});

  const Plan& plan() const { return plan_; }
  /// The accelerator the plan runs on (built from the registry, or the object given).
  const std::shared_ptr<accelerators::Accelerator>& accelerator() const { return accelerator_; }
  /// The strategy stack: the plan's strategy with this connector's accelerator and the plan's
  /// precision, environment and checkpoint IO (or the objects given for them). A strategy
  /// object given in `plugins` is returned itself, with every part it lacks connected
  /// (Strategy::connect, once). Throws NotSupportedError when this build cannot train with it.
  std::shared_ptr<strategies::Strategy> create_strategy() const;

 private:
  Plan plan_;
  PluginObjects plugins_;
  std::shared_ptr<accelerators::Accelerator> accelerator_;
  strategies::StrategySpec spec_;
  mutable bool strategy_connected_ = false;
};

}  // namespace volt::connectors
