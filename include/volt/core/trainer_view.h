#pragma once
#include <memory>
#include <string>
#include <vector>

#include "volt/core/optimizer_config.h"
#include "volt/core/trainer_state.h"
#include "volt/core/types.h"

namespace volt {

class Module;

/// What callbacks see of a run: its state, its metrics, and a few requests the Trainer
/// carries out (save a checkpoint, stop, send metrics to the loggers). Callbacks never
/// get the Trainer itself; the Trainer implements this view.
class TrainerView {
 public:
  virtual ~TrainerView() = default;

  virtual const TrainerState& state() const = 0;
  /// Latest value of every metric logged (epoch aggregates replace step values at epoch end).
  virtual const MetricMap& callback_metrics() const = 0;
  /// Metrics marked prog_bar=true.
  virtual const MetricMap& progress_bar_metrics() const = 0;
  /// The module being run (read it; do not change the training routine through it).
  virtual const Module& module() const = 0;
  virtual const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const = 0;
  virtual const std::vector<LRSchedulerConfig>& lr_schedulers() const = 0;
  /// Where the first logger writes (or default_root_dir without loggers).
  virtual std::string log_dir() const = 0;
  /// True when loggers are attached.
  virtual bool has_loggers() const = 0;

  /// Writes a checkpoint of the whole run (or only the weights) to `path`, atomically,
  /// on rank 0; all ranks must call it.
  virtual void save_checkpoint(const std::string& path, bool weights_only = false) = 0;
  /// Writes the module's parameters and buffers to `path` as a .safetensors file,
  /// atomically, on rank 0 (epoch and global step go in its metadata); all ranks call it.
  /// The default throws NotSupportedError: only the Trainer's view can write files.
  virtual void save_weights_safetensors(const std::string& path);
  /// Writes a checkpoint of the whole run to `path` from this process alone (rank 0 writes,
  /// other ranks return at once), waiting for no other rank: for a run that is failing,
  /// whose other ranks may never reach a collective again (OnExceptionCheckpoint). The
  /// default throws NotSupportedError: only the Trainer's view can write files.
  virtual void save_checkpoint_without_collective(const std::string& path);
  /// Sets the number of batches per optimizer step from the next training epoch on (called
  /// in on_train_epoch_start: from this epoch on). `factor` >= 1, on every rank alike
  /// (GradientAccumulationScheduler). The default throws NotSupportedError.
  virtual void set_accumulate_grad_batches(int64_t factor);
  /// Deletes a checkpoint file written earlier (rank 0).
  virtual void remove_checkpoint(const std::string& path) = 0;
  /// Asks the fit loop to stop after the current step; the reason is printed once.
  virtual void request_stop(const std::string& reason) = 0;
  /// Sends metrics to every logger (rank 0).
  virtual void log_metrics(const MetricMap& metrics, int64_t step) = 0;
  /// Sends a text, a histogram of `values`, or an image (float [C,H,W] in [0,1] or uint8)
  /// to every logger (rank 0; other ranks return at once). Loggers that cannot show one
  /// drop it. The defaults throw NotSupportedError: only the Trainer's view has loggers.
  virtual void log_text(const std::string& tag, const std::string& text, int64_t step);
  virtual void log_histogram(const std::string& tag, const at::Tensor& values, int64_t step);
  virtual void log_image(const std::string& tag, const at::Tensor& image, int64_t step);
  /// True if any rank (or all, with all=true) says true; the identity on one process.
  virtual bool reduce_boolean_decision(bool decision, bool all = true) = 0;
  /// Rank 0's `value` on every rank (e.g. a checkpoint file name built from metrics that
  /// differ per rank). A collective: every rank calls it. One process: `value`.
  virtual std::string broadcast_from_rank_zero(const std::string& value) { return value; }
};

}  // namespace volt
