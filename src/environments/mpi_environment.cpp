#include "volt/environments/mpi_environment.h"

#include "environments/detail/launch_variables.h"

namespace volt::environments {

using detail::require;
using detail::require_text;

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

}  // namespace volt::environments
