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

/// IBM LSF with jsrun (Summit-style): LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_SIZE,
/// JSM_NAMESPACE_RANK, JSM_NAMESPACE_LOCAL_RANK. Hosts come from the rank file (its first
/// line is the launch node and is skipped); rank 0's address is the first compute host,
/// the port MASTER_PORT or 10000 + LSB_JOBID % 1000. The node rank is this host's
/// position among the compute hosts (HOSTNAME, else gethostname()).
class LSFEnvironment : public FixedLayoutEnvironment {
 public:
  explicit LSFEnvironment(const Environ& env);
  static bool detect(const Environ& env);
  std::string name() const override { return "lsf"; }
  bool creates_processes_externally() const override { return true; }
};

}  // namespace volt::environments
