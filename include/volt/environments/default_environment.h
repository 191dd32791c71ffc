#pragma once
#include "volt/core/environ.h"
#include "volt/environments/fixed_layout_environment.h"

namespace volt::environments {

/// torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE,
/// GROUP_RANK or NODE_RANK) set by any launcher, or a single local process when they
/// are unset (Lightning's LightningEnvironment). Without MASTER_PORT a free port of this
/// machine is picked for a job Volt launches itself.
class DefaultEnvironment : public FixedLayoutEnvironment {
 public:
  explicit DefaultEnvironment(const Environ& env = Environ::current());
  /// True when the variables say a launcher started this process (WORLD_SIZE and RANK).
  static bool detect(const Environ& env = Environ::current());
  std::string name() const override { return "default"; }
  bool creates_processes_externally() const override { return external_; }

  /// A TCP port nobody listens on right now (bound and released on 127.0.0.1).
  static int find_free_port();

 private:
  bool external_ = false;
};

}  // namespace volt::environments
