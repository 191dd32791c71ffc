#pragma once
#include "volt/core/environ.h"
#include "volt/core/tpu_topology.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// A TPU host: Colab (a v2-8, one host), Kaggle (a v3-8, one host) or a Cloud TPU VM
/// (layout from TPU_ACCELERATOR_TYPE, TPU_WORKER_ID and TPU_WORKER_HOSTNAMES). Volt
/// starts one process per TPU device on each host (spawn), so the world is
/// hosts x devices per host, the node rank is TPU_WORKER_ID and rank 0 listens on the
/// first worker host (port MASTER_PORT, else 8476). A worker started by Volt's spawn
/// launcher (VOLT_SPAWN_DIR set) takes its place in the job from the variables the
/// launcher gave it (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK, MASTER_ADDR, MASTER_PORT)
/// and counts as started externally, so that it trains instead of spawning again.
class XLAEnvironment : public FixedLayoutEnvironment {
 public:
  XLAEnvironment(const Environ& env, TpuHost host);
  /// A TPU host by its variables (no files are looked at here).
  static bool detect(const Environ& env);
  std::string name() const override { return "tpu"; }
  bool creates_processes_externally() const override { return spawned_worker_; }
  /// "colab", "kaggle", "gce" or "unknown".
  const std::string& platform() const { return host_.platform; }
  const TpuHost& host() const { return host_; }

 private:
  TpuHost host_;
  bool spawned_worker_ = false;
};

}  // namespace volt::environments
