#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "volt/core/batch_limit.h"
#include "volt/core/types.h"

namespace volt {

/// Where a run is: what loops, callbacks and loggers may read. Written by the loops only.
struct TrainerState {
  TrainerFn fn = TrainerFn::kNone;
  RunningStage stage = RunningStage::kNone;
  /// Epochs completed or in progress (0-based index of the current epoch).
  int64_t current_epoch = 0;
  /// Optimizer steps taken (with accumulation: one per accumulated group).
  int64_t global_step = 0;
  /// Index of the current batch within its epoch/stage.
  int64_t batch_idx = 0;
  /// Training batches finished in the current epoch (a resumed run skips these).
  int64_t batches_done = 0;
  /// Training batches run in this fit across epochs (drives log_every_n_steps in manual
  /// optimization and val_check_interval counted across epochs); kept in checkpoints.
  int64_t batches_seen = 0;
  /// Lightning's `_batches_that_stepped`: training batches that ended with an optimizer
  /// step (every batch in manual optimization), counted after the batch's validation. The
  /// step value the loggers receive: a training row logged during batch k of a run without
  /// accumulation has step k, a validation row the value of the batch it ran after, the
  /// training epoch row the value minus one. Derived from global_step (batches_seen in
  /// manual optimization) when a fit starts, so checkpoints need not hold it.
  int64_t batches_that_stepped = 0;
  /// The run's log_every_n_steps (set when a fit starts): with batches_that_stepped, when
  /// step-level values reach the loggers (see LoggerConnector::should_update_logs).
  int64_t log_every_n_steps = 50;
  /// The run's val_check_interval and check_val_every_n_epoch (set when a fit starts):
  /// callbacks choose between checking at train epoch end and after validation by them,
  /// as Lightning's EarlyStopping and ModelCheckpoint do.
  BatchLimit val_check_interval;
  std::optional<int64_t> check_val_every_n_epoch = 1;
  /// The fit resumes from a checkpoint (set by the restore, cleared when the fit loop
  /// starts): no sanity check then, as in Lightning.
  bool restarting = false;
  /// fast_dev_run is on (set when a fit starts): EarlyStopping does not check and
  /// ModelCheckpoint does not save, as in Lightning.
  bool fast_dev_run = false;
  /// Batches the current training epoch will run (after limit_train_batches);
  /// kInfiniteBatches for a train loader without a length until its stream ends, when it
  /// becomes the number of batches the epoch ran.
  int64_t num_training_batches = 0;
  /// A train loader without a length: where its stream stands after batches_done batches
  /// (the examples each loader worker delivered, and the worker whose batch comes next);
  /// empty otherwise. Kept in checkpoints (volt.stream), so a resume continues at the next sample.
  std::vector<int64_t> stream_examples;
  int64_t stream_next_worker = 0;
  /// Under ddp: every rank's stream position after batches_done batches, in rank order (each
  /// rank's workers read their own shards, so the positions can differ), gathered with the
  /// ranks' vote on each fetch; empty with one process or a loader with a length. A checkpoint
  /// holds them all (volt.stream.ranks) and each rank resumes from its own.
  std::vector<std::vector<int64_t>> stream_rank_examples;
  std::vector<int64_t> stream_rank_next_worker;
  /// Batches per validation run (after limit_val_batches).
  int64_t num_val_batches = 0;
  /// Batches of the current evaluation/prediction run.
  int64_t num_eval_batches = 0;
  int64_t max_epochs = -1;
  int64_t max_steps = -1;
  /// Batches per optimizer step in the current training epoch: the accumulate_grad_batches
  /// flag (set when a fit starts), or what a callback asked for in on_train_epoch_start
  /// (TrainerView::set_accumulate_grad_batches). The epoch loop reads it once per epoch.
  int64_t accumulate_grad_batches = 1;
  bool sanity_checking = false;
  bool should_stop = false;
  std::string stop_reason;
  /// The signal (SIGTERM, SIGINT) that interrupted the fit, 0 if none. Then a checkpoint
  /// was saved after the step in progress, and training stopped whatever min_epochs says.
  int interrupted_by = 0;
  /// Where that checkpoint went.
  std::string interrupt_checkpoint;
  bool is_global_zero = true;
  int64_t world_size = 1;
  std::string default_root_dir = ".";
};

/// Lightning's rule for step-level values (the logger connector's training rows, the
/// LearningRateMonitor's rows): they go to the loggers when the step being completed
/// (`batches_that_stepped` + 1) is a multiple of `log_every_n_steps`, and at every batch
/// once a stop was requested, until it takes effect.
inline bool should_update_logs(int64_t batches_that_stepped, int64_t log_every_n_steps, bool should_stop) {
  return should_stop || (log_every_n_steps > 0 && (batches_that_stepped + 1) % log_every_n_steps == 0);
}

}  // namespace volt
