#include "volt/environments/xla_environment.h"

namespace volt::environments {

bool XLAEnvironment::detect(const Environ& env) {
  return describe_tpu_host(env, /*device_files=*/false).present;
}

XLAEnvironment::XLAEnvironment(const Environ& env, TpuHost host) : host_(std::move(host)) {
  const auto hosts = static_cast<int64_t>(host_.worker_hostnames.size());
  const int64_t per_host = host_.topology.devices_per_host > 0 ? host_.topology.devices_per_host : 1;
  world_size_ = hosts * per_host;
  node_rank_ = host_.worker_id;
  local_rank_ = env.get_int_or("LOCAL_RANK", 0);
  global_rank_ = node_rank_ * per_host + local_rank_;
  main_address_ = host_.worker_hostnames.front();
  main_port_ = 8476;
  if (auto port = env.get_int("MASTER_PORT")) set_port(*port, "MASTER_PORT");
  if (env.has("VOLT_SPAWN_DIR") && env.has("RANK") && env.has("WORLD_SIZE")) {
    // A worker of the spawn launcher: the launcher's layout (a job may use fewer devices
    // than the host has).
    spawned_worker_ = true;
    world_size_ = env.get_int_or("WORLD_SIZE", world_size_);
    global_rank_ = env.get_int_or("RANK", global_rank_);
    node_rank_ = env.get_int_or("GROUP_RANK", node_rank_);
    main_address_ = env.get_or("MASTER_ADDR", main_address_);
    check_ranks("the spawn launcher's layout (RANK, WORLD_SIZE)");
    return;
  }
  check_ranks("the TPU host layout (TPU_WORKER_ID, LOCAL_RANK)");
}

}  // namespace volt::environments
