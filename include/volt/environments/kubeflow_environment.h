#pragma once
#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// A Kubeflow PyTorchJob pod: KUBERNETES_PORT, MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
/// RANK set and not a torchelastic launch (Lightning's rule). The operator starts one
/// process per pod, so WORLD_SIZE counts pods and RANK is the pod's (node's) rank.
class KubeflowEnvironment : public FixedLayoutEnvironment {
 public:
  explicit KubeflowEnvironment(const Environ& env);
  static bool detect(const Environ& env);
  std::string name() const override { return "kubeflow"; }
  bool creates_processes_externally() const override { return true; }
};

}  // namespace volt::environments
