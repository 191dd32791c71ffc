#pragma once
#include <cstdint>

#include "volt/loops/evaluation_loop.h"
#include "volt/loops/loop.h"

namespace volt::loops {

/// One training epoch: batches, the optimization step (automatic, with gradient
/// accumulation and clipping, or manual), step-interval LR schedulers, logging cadence,
/// and validation at val_check_interval and at the epoch's end.
class TrainingEpochLoop : public Loop {
 public:
  using Loop::Loop;
  /// Runs the current epoch (ctx.state.current_epoch), starting after
  /// ctx.state.batches_done batches (non-zero when resuming mid-epoch).
  void run();
  /// True when this epoch should end with validation.
  bool is_validation_epoch() const;

 private:
  bool should_validate_after(int64_t batch_idx, int64_t num_batches, bool last) const;
  void run_validation();
  void step_schedulers(Interval interval);
  bool reached_max_steps() const;
  /// After a batch: if a termination signal arrived, saves interrupted.ckpt (or, on
  /// SLURM's requeue signal, hpc_ckpt_<n>.ckpt and requeues the job), asks to stop and
  /// returns true. `at_step_boundary` false (gradients of an unfinished accumulation
  /// window, which no checkpoint holds): the signal waits until the window's optimizer step.
  bool interrupted(bool at_step_boundary);
};

}  // namespace volt::loops
