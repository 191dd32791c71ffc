#pragma once
#include <cstdint>

#include "volt/loops/evaluation_loop.h"
#include "volt/loops/loop.h"

namespace volt::loops {

/// One training epoch: batches, the optimization step (automatic, with gradient
/// accumulation and clipping, or manual), step-interval LR schedulers, logging cadence,
/// and validation at val_check_interval, all as Lightning 2.2 does them: step values are
/// logged at TrainerState::batches_that_stepped, a stop request ends the epoch right after
/// the batch (or validation) that made it, once min_epochs/min_steps allow.
class TrainingEpochLoop : public Loop {
 public:
  using Loop::Loop;
  /// Runs the current epoch (ctx.state.current_epoch), starting after
  /// ctx.state.batches_done batches (non-zero when resuming mid-epoch).
  void run();
  /// True when this epoch validates (check_val_every_n_epoch; a val loader with batches).
  bool is_validation_epoch() const;
  /// A new fit: the "stop held back by min_epochs/min_steps" notice may be printed again.
  /// Also notes the fit's batch count per epoch (kInfiniteBatches for a stream), which every
  /// epoch of a stream starts from.
  void begin_fit() {
    announced_held_stop_ = false;
    planned_batches_ = ctx_.state.num_training_batches;
  }
  /// Prints, once per fit on rank 0, that a stop waits for min_epochs/min_steps.
  void announce_held_stop();

 private:
  /// Lightning's validation points: every int(n * fraction) batches, or every `count`
  /// batches (of the epoch, or of the run without check_val_every_n_epoch); and, whatever
  /// the schedule, at a batch after which a requested stop takes effect (`stopping`).
  /// `stream_ended`: this batch was the last of a stream without a length.
  bool should_validate_after(int64_t batch_idx, int64_t num_batches, bool stopping, bool stream_ended) const;
  void run_validation();
  void step_schedulers(Interval interval);
  bool reached_max_steps() const;
  /// After a batch: if a termination signal arrived, saves interrupted.ckpt (or, on
  /// SLURM's requeue signal, hpc_ckpt_<n>.ckpt and requeues the job), asks to stop and
  /// returns true. `at_step_boundary` false (gradients of an unfinished accumulation
  /// window, which no checkpoint holds): the signal waits until the window's optimizer step.
  /// `vote`: the ranks' vote started before the step (null on one process).
  bool interrupted(bool at_step_boundary, strategies::Strategy::PendingReduce* vote);
  /// This rank's ballot in the signal vote: 0 none, else the signal, NSIG + it for the requeue
  /// signal, so that the maximum picks the requeue signal over any other (its checkpoint is the
  /// one a requeued job looks for), otherwise the highest number.
  double signal_ballot() const;

  bool announced_held_stop_ = false;
  int64_t planned_batches_ = 0;
};

}  // namespace volt::loops
