#pragma once
#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// Processes started by torchrun / torch.distributed.elastic (TORCHELASTIC_RUN_ID set):
/// RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT are all required.
/// With torchrun's static rendezvous (its default; TORCHELASTIC_USE_AGENT_STORE=True) the
/// agent on node 0 already serves the store at MASTER_PORT: every rank joins it, under the
/// key prefix of the attempt ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as PyTorch's
/// env:// rendezvous uses).
class TorchElasticEnvironment : public FixedLayoutEnvironment {
 public:
  explicit TorchElasticEnvironment(const Environ& env);
  static bool detect(const Environ& env) { return env.has("TORCHELASTIC_RUN_ID"); }
  std::string name() const override { return "torchelastic"; }
  bool creates_processes_externally() const override { return true; }
};

}  // namespace volt::environments
