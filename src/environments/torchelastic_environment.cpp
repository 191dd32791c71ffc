#include "volt/environments/torchelastic_environment.h"

#include "environments/detail/launch_variables.h"

namespace volt::environments {

using detail::require;
using detail::require_text;

TorchElasticEnvironment::TorchElasticEnvironment(const Environ& env) {
  const std::string who = "torchrun (TORCHELASTIC_RUN_ID=" + env.get_or("TORCHELASTIC_RUN_ID", "") + ")";
  world_size_ = require(env, "WORLD_SIZE", who);
  global_rank_ = require(env, "RANK", who);
  local_rank_ = require(env, "LOCAL_RANK", who);
  node_rank_ = env.get_int_or("GROUP_RANK", 0);
  main_address_ = require_text(env, "MASTER_ADDR", who);
  set_port(require(env, "MASTER_PORT", who), "MASTER_PORT");
  check_ranks("torchrun's RANK/WORLD_SIZE");
  // Python spells it "True"/"False" (str of a bool).
  const std::string agent_store = env.get_or("TORCHELASTIC_USE_AGENT_STORE", "");
  launcher_store_ = agent_store == "True" || agent_store == "true" || agent_store == "1";
  if (launcher_store_) {
    store_prefix_ = "/worker/attempt_" + std::to_string(env.get_int_or("TORCHELASTIC_RESTART_COUNT", 0));
  }
}

}  // namespace volt::environments
