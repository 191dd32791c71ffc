#pragma once
#include "volt/loops/loop.h"
#include "volt/loops/training_epoch_loop.h"

namespace volt::loops {

/// The fit stage: sanity-check validation, then training epochs until max_epochs or
/// max_steps, or until something asks to stop once min_epochs and min_steps are met.
class FitLoop : public Loop {
 public:
  explicit FitLoop(LoopContext& ctx) : Loop(ctx), epoch_loop_(ctx) {}
  void run();
  /// Whether the loop has nothing left to do.
  bool done() const;
  /// The epochs the fit may run: max_epochs, or Lightning's 1000 when neither max_epochs
  /// nor max_steps is set, or -1 (no limit) when only max_steps is.
  int64_t max_epochs() const;

 private:
  void run_sanity_check();
  bool min_reached() const;
  TrainingEpochLoop epoch_loop_;
};

}  // namespace volt::loops
