#pragma once
#include <memory>
#include <string>
#include <vector>

#include "volt/core/environ.h"
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

/// Every environment name, in detection order: torchelastic, slurm, kubeflow, lsf, mpi,
/// tpu, default (Lightning's order: torchrun inside a SLURM allocation is torchelastic).
/// "auto" takes the first whose variables are present; "tpu" is only
/// considered when the accelerator is a TPU (then it is taken first), and "default"
/// (torchrun's variables, or one local process) always matches.
const std::vector<std::string>& environment_names();

/// Builds the environment the options and variables call for. `tpu_host` is the probed
/// TPU host when the accelerator is a TPU, else nullptr. Throws ConfigError when a chosen
/// environment's variables are missing or malformed.
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
