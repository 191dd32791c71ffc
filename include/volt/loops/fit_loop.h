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

 private:
  void run_sanity_check();
  int64_t max_epochs() const;
  bool min_reached() const;
  TrainingEpochLoop epoch_loop_;
};

}  // namespace volt::loops
