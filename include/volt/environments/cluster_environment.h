#pragma once
#include <cstdint>
#include <string>

namespace volt::environments {

/// Who this process is in a job and where rank 0 listens. Read from the launcher's or
/// scheduler's variables; a launcher that starts processes itself sets them.
class ClusterEnvironment {
 public:
  virtual ~ClusterEnvironment() = default;
  /// Registry key: "default", "slurm", "lsf", "mpi", "kubeflow", "xla", ...
  virtual std::string name() const = 0;
  /// True when something outside Volt (torchrun, srun, mpirun) started every process.
  virtual bool creates_processes_externally() const = 0;
  virtual std::string main_address() const = 0;
  virtual int main_port() const = 0;
  virtual int64_t world_size() const = 0;
  virtual int64_t global_rank() const = 0;
  virtual int64_t local_rank() const = 0;
  virtual int64_t node_rank() const = 0;
  /// Set by a strategy once it knows the process layout.
  /// True when the launcher already serves the rendezvous store at main_address():main_port()
  /// (torchrun's static rendezvous, TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0
  /// included, joins it as a client instead of rank 0 opening it.
  virtual bool joins_launcher_store() const { return false; }
  /// The prefix of this job's keys in that store ("" for a store of its own).
  virtual std::string store_prefix() const { return ""; }
  virtual void set_world_size(int64_t size) = 0;
  virtual void set_global_rank(int64_t rank) = 0;
  /// Checks the job against the Trainer's layout (devices per node, num_nodes) before
  /// anything starts; throws ConfigError when they disagree. Default: nothing to check.
  virtual void validate(int64_t /*devices_per_node*/, int64_t /*num_nodes*/) const {}
};

}  // namespace volt::environments
