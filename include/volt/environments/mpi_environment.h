#pragma once
#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// Processes started by mpirun/mpiexec, recognised from their variables alone (no MPI
/// library): Open MPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, or
/// MPICH/Intel MPI's PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS (PMIx:
/// PMIX_RANK with PMI_SIZE). The node rank is global rank / local size: ranks in blocks
/// of the same size per node (mpirun's default mapping; a round-robin mapping is a
/// ConfigError). Open MPI's OMPI_COMM_WORLD_NODE_RANK is a per-node process index and is
/// not used. Rank 0's address must come from MASTER_ADDR unless every rank is on one node
/// (then 127.0.0.1); the port from MASTER_PORT (default 29500).
class MPIEnvironment : public FixedLayoutEnvironment {
 public:
  explicit MPIEnvironment(const Environ& env);
  static bool detect(const Environ& env);
  std::string name() const override { return "mpi"; }
  bool creates_processes_externally() const override { return true; }
  /// Ranks on this node must be the devices per node, and the world devices x num_nodes.
  void validate(int64_t devices_per_node, int64_t num_nodes) const override;
  /// Ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS).
  int64_t local_size() const { return local_size_; }

 private:
  int64_t local_size_ = 1;
};

}  // namespace volt::environments
