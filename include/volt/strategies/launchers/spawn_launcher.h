#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "volt/environments/cluster_environment.h"
#include "volt/strategies/launchers/launcher.h"

namespace volt::strategies::launchers {

class WorkerGroup;

/// Strategy "ddp_spawn" (Lightning's _MultiProcessingLauncher): the parent runs no stage
/// itself. For each stage call it writes its state into a private folder, starts N workers
/// (this program again, with torchrun's variables and VOLT_SPAWN_DIR/VOLT_SPAWN_CALL), and
/// waits; the workers run the stage as one job, rank 0 hands the result back through the
/// folder, and the parent takes it over (LaunchedStage::take_back): after fit it holds the
/// trained state, as if it had trained in place.
///
/// In a worker the same program runs from its start: stage calls before the one it was
/// started for return at once, and after its hand-back the worker does not return from the
/// stage call, so the rest of the program (the code after trainer.fit) runs once, in the
/// parent. The worker flushes its output, says it is done (a file in the folder) and waits;
/// the parent ends it (SIGKILL; it is done and flushed) and reaps it, as a process pool
/// ends its workers. A worker whose stage throws returns the error from the stage call: its
/// main decides its exit code, and the parent stops the other workers and throws a
/// DistributedError with that worker's report. Workers die with the parent
/// (PR_SET_PDEATHSIG).
class SpawnLauncher : public Launcher {
 public:
  /// `environment`: the job's layout; `local_world_size`: workers to start on this node.
  SpawnLauncher(std::shared_ptr<environments::ClusterEnvironment> environment, int64_t local_world_size);
  ~SpawnLauncher() override;

  std::string name() const override { return "spawn"; }
  /// The workers re-run the program from its start.
  bool is_interactive_compatible() const override { return false; }
  /// In the parent: the workers run `stage`, and its result is taken back into `stage`.
  /// In a worker: runs `stage` when this is the call the worker was started for (else
  /// returns at once), hands the result back and waits to be ended.
  void launch(LaunchedStage& stage) override;
  void kill(int signal) override;

 protected:
  /// The VOLT_LAUNCHER value the workers get.
  virtual std::string worker_label() const { return "spawn"; }

 private:
  void launch_workers(LaunchedStage& stage, int64_t call);
  [[noreturn]] void end_worker(const std::string& dir) const;

  std::shared_ptr<environments::ClusterEnvironment> environment_;
  int64_t local_world_size_;
  std::mutex mutex_;
  WorkerGroup* running_ = nullptr;  ///< the workers of the launch under way (for kill)
};

}  // namespace volt::strategies::launchers
