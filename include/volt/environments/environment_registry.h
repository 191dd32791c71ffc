#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "volt/core/environ.h"
#include "volt/core/registry.h"
#include "volt/core/tpu_topology.h"
#include "volt/environments/cluster_environment.h"
#include "volt/environments/fixed_layout_environment.h"
#include "volt/environments/slurm_environment.h"

namespace volt::environments {

/// How the cluster environment is chosen.
struct EnvironmentOptions {
  /// "auto" (detect), or one of environment_names() to insist on it.
  std::string choice = "auto";
  SLURMEnvironment::Options slurm;
};

/// What an environment factory and detect() read.
struct EnvironmentContext {
  const Environ& env;
  const EnvironmentOptions& options;
  /// The probed TPU host when the accelerator is a TPU, else nullptr.
  const TpuHost* tpu_host = nullptr;
};

/// How cluster_environment="auto" finds an environment.
struct EnvironmentInfo {
  /// Whether this environment's variables are present; null: never detected (only chosen
  /// by name). The environment class's static detect, as in Lightning.
  std::function<bool(const EnvironmentContext&)> detect;
  /// Lower is tried first; "default" (order 1000) always matches, so a custom environment
  /// needs an order below 1000 to be detected.
  int detection_order = 500;
};

/// The `cluster_environment` option ("auto" is reserved: detection).
using EnvironmentRegistry = InfoRegistry<EnvironmentInfo, ClusterEnvironment, const EnvironmentContext&>;

/// The registry, with Volt's environments on first use: torchelastic (100), slurm (200),
/// kubeflow (300), lsf (400), mpi (500), tpu (600, only when the accelerator is a TPU, and
/// then taken first), default (1000).
EnvironmentRegistry& environment_registry();
/// Adds Volt's environments to `registry` (what environment_registry() calls once).
void register_builtin_environments(EnvironmentRegistry& registry);

/// Adds (or replaces) an environment name:
///
///     volt::environments::register_environment("pbs", "PBS Pro (PBS_* variables)",
///         {.detect = [](const EnvironmentContext& c) { return c.env.has("PBS_JOBID"); }, .detection_order = 150},
///         [](const EnvironmentContext& c) { return std::make_shared<PBSEnvironment>(c.env); });
void register_environment(const std::string& key, std::string description, EnvironmentInfo info,
                          EnvironmentRegistry::Factory factory);

/// Every environment name, in detection order: torchelastic, slurm, kubeflow, lsf, mpi,
/// tpu, default (Lightning's order: torchrun inside a SLURM allocation is torchelastic),
/// with registered ones at their order. "auto" takes the first whose variables are
/// present; "tpu" is only considered when the accelerator is a TPU (then it is taken
/// first), and "default" (torchrun's variables, or one local process) always matches.
std::vector<std::string> environment_names();

/// Builds the environment the options and variables call for. `tpu_host` is the probed
/// TPU host when the accelerator is a TPU, else nullptr. Throws ConfigError when a chosen
/// environment's variables are missing or malformed, or its name is not known.
std::shared_ptr<ClusterEnvironment> select_environment(const Environ& env, const EnvironmentOptions& options,
                                                       const TpuHost* tpu_host);

/// An environment whose values were decided elsewhere (a Plan): what a strategy stack
/// is built with, so that the stack depends on the Plan alone.
class StaticEnvironment : public FixedLayoutEnvironment {
 public:
  StaticEnvironment(std::string name, bool external, std::string main_address, int main_port, int64_t world_size,
                    int64_t global_rank, int64_t local_rank, int64_t node_rank, bool launcher_store = false,
                    std::string store_prefix = "");
  std::string name() const override { return name_; }
  bool creates_processes_externally() const override { return external_; }

 private:
  std::string name_;
  bool external_;
};

}  // namespace volt::environments
