#include "volt/environments/kubeflow_environment.h"

#include "volt/environments/torchelastic_environment.h"
#include "environments/detail/launch_variables.h"

namespace volt::environments {

using detail::require;
using detail::require_text;

bool KubeflowEnvironment::detect(const Environ& env) {
  for (const char* key : {"KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}) {
    if (!env.has(key)) return false;
  }
  return !TorchElasticEnvironment::detect(env);
}

KubeflowEnvironment::KubeflowEnvironment(const Environ& env) {
  const std::string who = "a Kubeflow PyTorchJob";
  world_size_ = require(env, "WORLD_SIZE", who);
  global_rank_ = require(env, "RANK", who);
  local_rank_ = 0;
  node_rank_ = global_rank_;
  main_address_ = require_text(env, "MASTER_ADDR", who);
  set_port(require(env, "MASTER_PORT", who), "MASTER_PORT");
  check_ranks("Kubeflow's RANK/WORLD_SIZE");
}

}  // namespace volt::environments
