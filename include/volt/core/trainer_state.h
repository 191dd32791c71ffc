#pragma once
#include <cstdint>
#include <string>

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
  /// Batches the current training epoch will run (after limit_train_batches).
  int64_t num_training_batches = 0;
  /// Batches per validation run (after limit_val_batches).
  int64_t num_val_batches = 0;
  /// Batches of the current evaluation/prediction run.
  int64_t num_eval_batches = 0;
  int64_t max_epochs = -1;
  int64_t max_steps = -1;
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

}  // namespace volt
