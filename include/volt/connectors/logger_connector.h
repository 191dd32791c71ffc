#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/core/step_context.h"
#include "volt/core/trainer_state.h"
#include "volt/core/types.h"
#include "volt/loggers/logger.h"
#include "volt/strategies/strategy.h"

namespace volt::connectors {

/// Everything ctx.log records: step values, epoch aggregates (mean weighted by batch
/// size, sum, max, min), what callbacks and the progress bar see, and what goes to the
/// loggers (on rank 0, every log_every_n_steps training batches and at epoch ends).
class LoggerConnector {
 public:
  LoggerConnector(std::vector<std::shared_ptr<loggers::Logger>> loggers, int64_t log_every_n_steps,
                  strategies::Strategy& strategy);

  /// Records one value from a step or hook of `stage`. `default_batch_size` weights the
  /// epoch mean unless options.batch_size is set.
  void log(RunningStage stage, const std::string& name, const at::Tensor& value, const LogOptions& options,
           int64_t default_batch_size);

  /// Starts an epoch of `stage`: clears its aggregates and its step values.
  void begin_epoch(RunningStage stage);
  /// After a training batch's on_train_batch_end hooks (not after a batch that only
  /// accumulated gradients): when volt::should_update_logs (trainer_state.h), sends the epoch's latest step values
  /// (a value logged at an earlier batch of the epoch stays in the row, as in Lightning)
  /// with an "epoch" column to the loggers at step `batches_that_stepped`.
  void end_train_batch(int64_t batches_that_stepped, int64_t epoch, bool should_stop = false);
  /// After an evaluation batch (not in the sanity check): the evaluation run's latest step
  /// values (on_step=true in validation_step/test_step) go to the loggers at the count of
  /// `stage`'s batches seen before this one (continuing across the validation runs of a fit,
  /// as Lightning's val loop does), without an "epoch" column.
  void end_eval_batch(RunningStage stage);
  /// Restarts the batch count end_eval_batch logs at (a new fit, validate or test call).
  void reset_eval_step_count(RunningStage stage);
  /// Ends an epoch of `stage`: aggregates become callback metrics ("name" and, when also
  /// logged per step, "name_epoch") and go to the loggers at `step` (the loops pass
  /// batches_that_stepped, minus one for the training epoch, as Lightning does). Returns
  /// them. Under several processes, a value aggregated without sync_dist=true is warned
  /// about once per name (rank 0): each rank would keep its own.
  MetricMap end_epoch(RunningStage stage, int64_t step, int64_t epoch);
  /// Forgets everything recorded (between stages such as the sanity check and training).
  void reset_metrics();

  const MetricMap& callback_metrics() const { return callback_metrics_; }
  /// Takes metrics computed elsewhere (spawned workers) as this run's latest values.
  void set_callback_metrics(const MetricMap& metrics) { callback_metrics_ = metrics; }
  const MetricMap& progress_bar_metrics() const { return progress_bar_metrics_; }
  /// What was last sent to the loggers.
  const MetricMap& logged_metrics() const { return logged_metrics_; }

  /// Sends metrics straight to every logger (rank 0).
  void log_metrics(const MetricMap& metrics, int64_t step);
  void log_hyperparams(const std::map<std::string, std::string>& params);
  /// Flushes and closes every logger with "success", "failed" or "interrupted".
  void finalize(const std::string& status);
  bool has_loggers() const { return !loggers_.empty(); }
  const std::vector<std::shared_ptr<loggers::Logger>>& loggers() const { return loggers_; }
  /// The first logger's version (empty without loggers).
  std::string version();
  /// The first logger's folder, or `fallback` without loggers.
  std::string log_dir(const std::string& fallback);
  /// Several ranks: every rank takes rank 0's log folder and version (a collective; call
  /// on every rank once the process group is up). No-op on one process.
  void sync_across_ranks();

 private:
  struct Aggregate {
    double sum = 0.0;
    double weight = 0.0;
    double max = 0.0;
    double min = 0.0;
    int64_t count = 0;
    std::string reduce_fx;
    bool prog_bar = false;
    bool logger = true;
    bool sync_dist = false;
    bool also_on_step = false;
  };
  std::map<std::string, Aggregate>& aggregates(RunningStage stage);

  std::vector<std::shared_ptr<loggers::Logger>> loggers_;
  int64_t log_every_n_steps_;
  strategies::Strategy& strategy_;
  std::map<std::string, Aggregate> train_aggregates_;
  std::map<std::string, Aggregate> eval_aggregates_;
  MetricMap step_metrics_;       // the training epoch's latest step values bound for the loggers
  MetricMap eval_step_metrics_;  // the same for the evaluation run in progress
  int64_t val_steps_seen_ = 0;
  int64_t test_steps_seen_ = 0;
  std::set<std::string> warned_sync_dist_;
  MetricMap callback_metrics_;
  MetricMap progress_bar_metrics_;
  MetricMap logged_metrics_;
  bool synced_ = false;
  std::string synced_log_dir_;
  std::string synced_version_;
};

}  // namespace volt::connectors
