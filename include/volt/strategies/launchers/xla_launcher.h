#pragma once
#include <string>

#include "volt/strategies/launchers/spawn_launcher.h"

namespace volt::strategies::launchers {

/// Strategy "xla" (Lightning's _XLALauncher, XLA's spawn): one worker per TPU device of this
/// host, started and ended as SpawnLauncher does. Each worker finds its place from the
/// launcher's variables (the TPU-host environment sees VOLT_SPAWN_DIR) and trains on its
/// own device (lazy:<local rank>); rank 0's result comes back to the parent.
class XLALauncher : public SpawnLauncher {
 public:
  using SpawnLauncher::SpawnLauncher;
  std::string name() const override { return "xla"; }

 protected:
  std::string worker_label() const override { return "xla"; }
};

}  // namespace volt::strategies::launchers
