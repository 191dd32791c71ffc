#pragma once
#include <string>

namespace volt::strategies::launchers {

/// One stage call (fit, validate, test, predict) as a launcher sees it: the Trainer
/// implements it for every stage it runs and gives it to its strategy's launcher
/// (Launcher::launch). The result of the stage stays with the object: computed by run() in
/// this process, or taken over from the spawned workers by take_back().
class LaunchedStage {
 public:
  virtual ~LaunchedStage() = default;

  /// "fit", "validate", "test" or "predict", for messages.
  virtual std::string name() const = 0;
  /// Runs the whole stage in this process, on this rank (set-up, loops, teardown). Throws
  /// what the stage throws. `handover_dir`: in a spawned worker, the folder whose start
  /// state (save_start) the stage restores before it trains; empty elsewhere.
  virtual void run(const std::string& handover_dir) = 0;

  /// Spawn launchers, in the parent, before the workers start: writes into `dir` what the
  /// workers start from (the module's weights; for a fit that continues an earlier one the
  /// optimizers, progress and callbacks too).
  virtual void save_start(const std::string& dir) = 0;
  /// Spawn launchers, in every worker, after run(): rank 0 writes the stage's result into
  /// `dir`, and every rank waits until it is there (a collective: all ranks call it).
  virtual void hand_back(const std::string& dir) = 0;
  /// Spawn launchers, in the parent, after every worker handed back: takes the result over
  /// (trained state, metrics, predictions), so that the parent holds what the workers had.
  virtual void take_back(const std::string& dir) = 0;
};

}  // namespace volt::strategies::launchers
