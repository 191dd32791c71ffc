#include "volt/environments/torchelastic_environment.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "volt/core/error.h"

namespace volt::environments {
namespace {

int64_t require(const Environ& env, const char* key, const std::string& who) {
  auto v = env.get_int(key);
  if (!v) {
    throw ConfigError(who + " sets " + key + ", but it is missing here. Start the processes with the launcher, or "
                      "set the variable.");
  }
  return *v;
}

std::string require_text(const Environ& env, const char* key, const std::string& who) {
  auto v = env.get(key);
  if (!v || v->empty()) {
    throw ConfigError(who + " sets " + key + ", but it is missing here. Start the processes with the launcher, or "
                      "set the variable.");
  }
  return *v;
}

}  // namespace

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

bool MPIEnvironment::detect(const Environ& env) {
  return env.has("OMPI_COMM_WORLD_SIZE") || env.has("PMI_SIZE") || env.has("PMIX_RANK");
}

MPIEnvironment::MPIEnvironment(const Environ& env) {
  std::string local_vars;
  if (env.has("OMPI_COMM_WORLD_SIZE")) {
    const std::string who = "mpirun (Open MPI)";
    world_size_ = require(env, "OMPI_COMM_WORLD_SIZE", who);
    global_rank_ = require(env, "OMPI_COMM_WORLD_RANK", who);
    local_rank_ = env.get_int_or("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    local_size_ = env.get_int_or("OMPI_COMM_WORLD_LOCAL_SIZE", world_size_);
    // Not OMPI_COMM_WORLD_NODE_RANK: that is the process's index among those on its node
    // (across jobs), a local rank, not the node's index.
    local_vars = "OMPI_COMM_WORLD_RANK=" + std::to_string(global_rank_) + ", OMPI_COMM_WORLD_LOCAL_RANK=" +
                 std::to_string(local_rank_) + ", OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(local_size_);
  } else {
    const std::string who = "an MPI launcher (PMI)";
    if (!env.has("PMI_SIZE")) {
      throw ConfigError("PMIX_RANK is set but PMI_SIZE is not, so the world size is unknown. Export PMI_SIZE (or "
                        "WORLD_SIZE) from the launcher, or use Open MPI's mpirun.");
    }
    world_size_ = require(env, "PMI_SIZE", who);
    global_rank_ = env.has("PMI_RANK") ? require(env, "PMI_RANK", who) : require(env, "PMIX_RANK", who);
    local_rank_ = env.get_int_or("MPI_LOCALRANKID", 0);
    local_size_ = env.get_int_or("MPI_LOCALNRANKS", world_size_);
    local_vars = "rank " + std::to_string(global_rank_) + ", MPI_LOCALRANKID=" + std::to_string(local_rank_) +
                 ", MPI_LOCALNRANKS=" + std::to_string(local_size_);
  }
  check_ranks("the MPI rank/size variables");
  if (local_size_ < 1 || local_size_ > world_size_ || local_rank_ < 0 || local_rank_ >= local_size_) {
    throw ConfigError("the MPI launcher set " + local_vars + " with a world of " + std::to_string(world_size_) +
                      " ranks: the local rank must be below the local size, and the local size at most the world "
                      "size. Start the program with mpirun itself, not from a script that changes these variables.");
  }
  // Without an MPI library the only layout the variables describe is ranks in blocks of
  // local_size per node (mpirun's default --map-by slot); anything else has no node index.
  if (global_rank_ % local_size_ != local_rank_) {
    throw ConfigError("the MPI launcher set " + local_vars + ": rank " + std::to_string(global_rank_) +
                      " is not local rank " + std::to_string(global_rank_ % local_size_) + " of a block of " +
                      std::to_string(local_size_) + " consecutive ranks, so its node cannot be told from them (the "
                      "ranks were mapped round-robin over the nodes). Run mpirun with --map-by slot (its default) "
                      "and the same number of ranks on every node.");
  }
  node_rank_ = global_rank_ / local_size_;
  if (auto addr = env.get("MASTER_ADDR")) {
    main_address_ = *addr;
  } else if (local_size_ != world_size_) {
    throw ConfigError("this MPI job spans several nodes (" + std::to_string(world_size_) + " ranks, " +
                      std::to_string(local_size_) + " on this node) and MASTER_ADDR is not set. Volt uses no MPI "
                      "library to share rank 0's address: pass it, e.g. mpirun -x MASTER_ADDR=<first host>.");
  }
  if (auto port = env.get_int("MASTER_PORT")) set_port(*port, "MASTER_PORT");
}

void MPIEnvironment::validate(int64_t devices_per_node, int64_t num_nodes) const {
  if (local_size_ != devices_per_node || world_size_ != devices_per_node * num_nodes) {
    throw ConfigError("the MPI job runs " + std::to_string(local_size_) + " rank(s) on this node and " +
                      std::to_string(world_size_) + " in all, but the Trainer uses devices=" +
                      std::to_string(devices_per_node) + " per node and num_nodes=" + std::to_string(num_nodes) +
                      ". Start mpirun with -np " + std::to_string(devices_per_node * num_nodes) + " and --npernode " +
                      std::to_string(devices_per_node) + ", or set devices=" + std::to_string(local_size_) +
                      " and num_nodes=" + std::to_string(world_size_ / local_size_) + ".");
  }
}

bool LSFEnvironment::detect(const Environ& env) {
  for (const char* key : {"LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE"}) {
    if (!env.has(key)) return false;
  }
  return true;
}

LSFEnvironment::LSFEnvironment(const Environ& env) {
  const std::string who = "LSF's jsrun";
  world_size_ = require(env, "JSM_NAMESPACE_SIZE", who);
  global_rank_ = require(env, "JSM_NAMESPACE_RANK", who);
  local_rank_ = require(env, "JSM_NAMESPACE_LOCAL_RANK", who);
  check_ranks("JSM_NAMESPACE_RANK/JSM_NAMESPACE_SIZE");
  const std::string rankfile = require_text(env, "LSB_DJOB_RANKFILE", who);
  std::ifstream in(rankfile);
  if (!in) throw ConfigError("LSB_DJOB_RANKFILE=" + rankfile + " cannot be read; is this an LSF job?");
  std::vector<std::string> hosts;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (first) {  // the launch (batch) node runs no rank
      first = false;
      continue;
    }
    if (std::find(hosts.begin(), hosts.end(), line) == hosts.end()) hosts.push_back(line);
  }
  if (hosts.empty()) throw ConfigError("LSB_DJOB_RANKFILE=" + rankfile + " lists no compute host.");
  main_address_ = hosts.front();
  std::string self = env.get_or("HOSTNAME", "");
  if (self.empty()) {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) == 0) self = buf;
  }
  auto it = std::find(hosts.begin(), hosts.end(), self);
  node_rank_ = it == hosts.end() ? 0 : static_cast<int64_t>(it - hosts.begin());
  if (auto port = env.get_int("MASTER_PORT")) {
    set_port(*port, "MASTER_PORT");
  } else {
    set_port(10000 + require(env, "LSB_JOBID", who) % 1000, "LSB_JOBID-derived port");
  }
}

}  // namespace volt::environments
