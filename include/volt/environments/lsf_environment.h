#pragma once
#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

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
