#include "volt/environments/environment_registry.h"

#include <algorithm>
#include <mutex>

#include "volt/core/error.h"
#include "volt/environments/default_environment.h"
#include "volt/environments/kubeflow_environment.h"
#include "volt/environments/lsf_environment.h"
#include "volt/environments/mpi_environment.h"
#include "volt/environments/torchelastic_environment.h"
#include "volt/environments/xla_environment.h"

namespace volt::environments {

void register_builtin_environments(EnvironmentRegistry& r) {
  using E = std::shared_ptr<ClusterEnvironment>;
  using C = const EnvironmentContext&;
  // torchelastic before slurm, as in Lightning: torchrun inside an salloc/sbatch allocation is
  // a normal launch, and its processes carry the allocation's SLURM_* variables too.
  r.add("torchelastic", "torchrun / torch.distributed.elastic (TORCHELASTIC_RUN_ID, RANK, WORLD_SIZE, ...)",
        {[](C c) { return TorchElasticEnvironment::detect(c.env); }, 100},
        [](C c) -> E { return std::make_shared<TorchElasticEnvironment>(c.env); });
  r.add("slurm", "SLURM jobs started by srun (SLURM_NTASKS, SLURM_PROCID, ...); requeue on a signal",
        {[](C c) { return c.options.slurm.auto_detect && SLURMEnvironment::detect(c.env); }, 200},
        [](C c) -> E { return std::make_shared<SLURMEnvironment>(c.env, c.options.slurm); });
  r.add("kubeflow", "a Kubeflow PyTorchJob (KUBERNETES_PORT, MASTER_ADDR, WORLD_SIZE, RANK)",
        {[](C c) { return KubeflowEnvironment::detect(c.env); }, 300},
        [](C c) -> E { return std::make_shared<KubeflowEnvironment>(c.env); });
  r.add("lsf", "IBM Spectrum LSF jobs started by jsrun (LSB_JOBID, JSM_NAMESPACE_*)",
        {[](C c) { return LSFEnvironment::detect(c.env); }, 400},
        [](C c) -> E { return std::make_shared<LSFEnvironment>(c.env); });
  r.add("mpi", "processes started by mpirun (OMPI_COMM_WORLD_*, PMI_*)",
        {[](C c) { return MPIEnvironment::detect(c.env); }, 500},
        [](C c) -> E { return std::make_shared<MPIEnvironment>(c.env); });
  // Detected through the accelerator, not variables: select_environment takes it first on a TPU.
  r.add("tpu", "TPU hosts (Colab, Kaggle, Cloud TPU VMs), when the accelerator is a TPU", {nullptr, 600}, [](C c) -> E {
    if (c.tpu_host == nullptr || !c.tpu_host->present) {
      throw ConfigError(
          "cluster_environment=\"tpu\" needs a TPU host, and none was found (no TPU variables, "
          "device files or libtpu). Use accelerator=\"tpu\" on a TPU VM, Colab or Kaggle.");
    }
    return std::make_shared<XLAEnvironment>(c.env, *c.tpu_host);
  });
  r.add("default", "torchrun's variables without its agent (MASTER_ADDR, RANK, ...), or one local process",
        {[](C) { return true; }, 1000}, [](C c) -> E { return std::make_shared<DefaultEnvironment>(c.env); });
}

EnvironmentRegistry& environment_registry() {
  static EnvironmentRegistry registry("cluster_environment", {"auto"});
  static std::once_flag built_in;
  std::call_once(built_in, [] { register_builtin_environments(registry); });
  return registry;
}

void register_environment(const std::string& key, std::string description, EnvironmentInfo info,
                          EnvironmentRegistry::Factory factory) {
  environment_registry().add(key, std::move(description), std::move(info), std::move(factory));
}

namespace {

std::vector<EnvironmentRegistry::Entry> in_detection_order() {
  auto entries = environment_registry().entries();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.info.detection_order < b.info.detection_order; });
  return entries;
}

}  // namespace

std::vector<std::string> environment_names() {
  std::vector<std::string> names;
  for (const auto& e : in_detection_order()) names.push_back(e.key);
  return names;
}

std::shared_ptr<ClusterEnvironment> select_environment(const Environ& env, const EnvironmentOptions& options,
                                                       const TpuHost* tpu_host) {
  const EnvironmentContext context{env, options, tpu_host};
  auto& registry = environment_registry();
  if (registry_key(options.choice) != "auto") return registry.create(options.choice, context);
  if (tpu_host != nullptr) return registry.create("tpu", context);
  for (const auto& e : in_detection_order()) {
    if (e.key != "tpu" && e.info.detect && e.info.detect(context)) return registry.create(e.key, context);
  }
  return registry.create("default", context);
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
