#pragma once
#include <string>
#include <vector>

#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// Expands a SLURM host list ("node[1-3,7],gpu[01-02],login") into host names, in order.
/// Throws ConfigError on a malformed list.
std::vector<std::string> expand_slurm_nodelist(const std::string& nodelist);

/// A job started by srun/sbatch: ranks from SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID and
/// SLURM_NTASKS; rank 0's address is the first host of SLURM_NODELIST (MASTER_ADDR wins
/// when set); the port is MASTER_PORT or 15000 + the last four digits of SLURM_JOB_ID.
class SLURMEnvironment : public FixedLayoutEnvironment {
 public:
  struct Options {
    /// Detect SLURM at all (false: an srun job is treated as a plain process).
    bool auto_detect = true;
    /// Save a checkpoint and requeue on the requeue signal.
    bool auto_requeue = true;
    std::string requeue_signal = "SIGUSR1";
    /// Command that requeues this job ("$SLURM_JOB_ID" or the array task id is appended).
    std::string requeue_command = "scontrol requeue";
  };

  explicit SLURMEnvironment(const Environ& env, Options options);
  explicit SLURMEnvironment(const Environ& env) : SLURMEnvironment(env, Options{}) {}
  /// SLURM_NTASKS is set and the job is not an interactive shell (SLURM_JOB_NAME bash or
  /// interactive), as Lightning decides.
  static bool detect(const Environ& env);

  std::string name() const override { return "slurm"; }
  bool creates_processes_externally() const override { return true; }
  /// SLURM_NTASKS_PER_NODE must equal devices and SLURM_NNODES num_nodes: a job script
  /// that asks for fewer tasks than the Trainer uses would otherwise hang at rendezvous.
  void validate(int64_t devices_per_node, int64_t num_nodes) const override;

  const Options& options() const { return options_; }
  /// The job to requeue: SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for array tasks, else SLURM_JOB_ID.
  const std::string& job_id() const { return job_id_; }

 private:
  Options options_;
  Environ env_;
  std::string job_id_;
};

}  // namespace volt::environments
