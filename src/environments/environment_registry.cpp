#include "volt/environments/environment_registry.h"

#include "volt/core/error.h"
#include "volt/environments/default_environment.h"
#include "volt/environments/kubeflow_environment.h"
#include "volt/environments/lsf_environment.h"
#include "volt/environments/mpi_environment.h"
#include "volt/environments/torchelastic_environment.h"
#include "volt/environments/xla_environment.h"

namespace volt::environments {

// torchelastic before slurm, as in Lightning: torchrun inside an salloc/sbatch allocation is
// a normal launch, and its processes carry the allocation's SLURM_* variables too.
const std::vector<std::string>& environment_names() {
  static const std::vector<std::string> names = {"torchelastic", "slurm", "kubeflow", "lsf", "mpi", "tpu", "default"};
  return names;
}

namespace {

std::shared_ptr<ClusterEnvironment> build(const std::string& name, const Environ& env,
                                          const EnvironmentOptions& options, const TpuHost* tpu_host) {
  if (name == "slurm") return std::make_shared<SLURMEnvironment>(env, options.slurm);
  if (name == "torchelastic") return std::make_shared<TorchElasticEnvironment>(env);
  if (name == "kubeflow") return std::make_shared<KubeflowEnvironment>(env);
  if (name == "lsf") return std::make_shared<LSFEnvironment>(env);
  if (name == "mpi") return std::make_shared<MPIEnvironment>(env);
  if (name == "tpu") {
    if (tpu_host == nullptr || !tpu_host->present) {
      throw ConfigError("cluster_environment=\"tpu\" needs a TPU host, and none was found (no TPU variables, "
                        "device files or libtpu). Use accelerator=\"tpu\" on a TPU VM, Colab or Kaggle.");
    }
    return std::make_shared<XLAEnvironment>(env, *tpu_host);
  }
  if (name == "default") return std::make_shared<DefaultEnvironment>(env);
  std::string known;
  for (const auto& n : environment_names()) known += ", " + n;
  throw ConfigError("cluster_environment='" + name + "' is not known. Known: auto" + known + ".");
}

bool detected(const std::string& name, const Environ& env, const EnvironmentOptions& options) {
  if (name == "slurm") return options.slurm.auto_detect && SLURMEnvironment::detect(env);
  if (name == "torchelastic") return TorchElasticEnvironment::detect(env);
  if (name == "kubeflow") return KubeflowEnvironment::detect(env);
  if (name == "lsf") return LSFEnvironment::detect(env);
  if (name == "mpi") return MPIEnvironment::detect(env);
  return name == "default";
}

}  // namespace

std::shared_ptr<ClusterEnvironment> select_environment(const Environ& env, const EnvironmentOptions& options,
                                                       const TpuHost* tpu_host) {
  if (options.choice != "auto") return build(options.choice, env, options, tpu_host);
  if (tpu_host != nullptr) return build("tpu", env, options, tpu_host);
  for (const auto& name : environment_names()) {
    if (name != "tpu" && detected(name, env, options)) return build(name, env, options, tpu_host);
  }
  return build("default", env, options, tpu_host);
}

StaticEnvironment::StaticEnvironment(std::string name, bool external, std::string main_address, int main_port,
                                     int64_t world_size, int64_t global_rank, int64_t local_rank, int64_t node_rank,
                                     bool launcher_store, std::string store_prefix)
    : name_(std::move(name)), external_(external) {
  launcher_store_ = launcher_store;
  store_prefix_ = std::move(store_prefix);
  main_address_ = std::move(main_address);
  main_port_ = main_port;
  world_size_ = world_size;
  global_rank_ = global_rank;
  local_rank_ = local_rank;
  node_rank_ = node_rank;
  check_ranks("the plan's " + name_ + " environment");
}

}  // namespace volt::environments
