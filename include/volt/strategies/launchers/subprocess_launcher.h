#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "volt/environments/cluster_environment.h"
#include "volt/strategies/launchers/launcher.h"

namespace volt::strategies::launchers {

/// Strategy "ddp" without an outside launcher (Lightning's _SubprocessScriptLauncher): this
/// process is local rank 0 and runs the stage itself; the first launch starts local ranks
/// 1..N-1 as copies of this program (same executable and arguments, torchrun's variables),
/// which run the program from its start, so code before the first stage runs in every rank.
///
/// A monitor thread watches the other ranks. When one fails it stops the others and keeps
/// the report; this rank's pending collective then fails at once (their sockets closed),
/// and the strategy raises the report (raise_if_a_rank_failed) as a DistributedError that
/// the Trainer reports and the program's own main turns into its exit code. Where this rank
/// is blocked in a wait that cannot be interrupted (c10d's set-up of the process group
/// waiting for a connection from the dead rank), it has 5 s to take notice; then the
/// monitor ends the process with exit code 1 after saying so, as Lightning's observer ends
/// its main process, so that no process of the job is left behind.
class SubprocessLauncher : public Launcher {
 public:
  /// `environment`: the job's layout (MASTER_ADDR/PORT, this node's rank, the world size);
  /// `local_world_size`: processes on this node, this one included.
  SubprocessLauncher(std::shared_ptr<environments::ClusterEnvironment> environment, int64_t local_world_size);
  /// After a failure: stops the other ranks. Otherwise waits until they finished the
  /// program (each one's main returns), writing a late failure's report to stderr.
  ~SubprocessLauncher() override;

  std::string name() const override { return "subprocess"; }
  bool is_interactive_compatible() const override { return false; }
  /// Starts the other local ranks (the first time only), then runs `stage` here as rank 0.
  void launch(LaunchedStage& stage) override;
  void kill(int signal) override;

  /// Whether the other local ranks have been started.
  bool started() const;
  /// Whether the monitor saw a local rank fail (the others are stopped by then).
  bool rank_failed() const;
  /// Throws a DistributedError with the failed rank's report when there is one.
  void raise_if_a_rank_failed() const;
  /// Waits up to `wait` for the monitor's report (a peer's death shows first as a closed
  /// connection); true when a rank failed.
  bool wait_for_failure(std::chrono::milliseconds wait) const;
  /// A stage failed on this rank: names a rank that died meanwhile (on stderr; this rank's
  /// error is often its echo) and stops the other ranks.
  void on_stage_failure();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace volt::strategies::launchers
