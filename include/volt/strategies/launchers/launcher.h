#pragma once
#include <string>

#include "volt/strategies/launchers/launched_stage.h"

namespace volt::strategies::launchers {

/// How the processes of a job come to run a stage (Lightning's _Launcher). A strategy that
/// needs processes of its own returns one from Strategy::launcher(); the Trainer runs every
/// stage through it (`launch`), or, when there is none (one process, or processes started
/// by torchrun/srun/mpirun/`volt launch`), runs the stage itself.
///
/// A failure never ends this process: a worker's failure reaches the caller of launch() as
/// a DistributedError with the worker's report (rank, host, exit code or signal, its last
/// lines of stderr), after the other workers were stopped.
class Launcher {
 public:
  virtual ~Launcher() = default;

  /// "subprocess", "spawn" or "xla".
  virtual std::string name() const = 0;
  /// Whether it works in a program that cannot be started again from its beginning (an
  /// interactive session): false for every launcher that re-runs the program.
  virtual bool is_interactive_compatible() const = 0;
  /// Runs `stage` on every process of the job and leaves its result with `stage` in this
  /// process. Throws what the stage threw here, or a DistributedError naming the worker
  /// that failed.
  virtual void launch(LaunchedStage& stage) = 0;
  /// Ends the workers this launcher started that still run: `signal` to each, SIGKILL to
  /// those alive after a grace period, and every one reaped (no process is left behind).
  virtual void kill(int signal) = 0;
};

}  // namespace volt::strategies::launchers
