#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "volt/callbacks/callback.h"
#include "volt/core/types.h"

namespace volt::callbacks {

/// Logs learning rates (and optionally momenta) to the loggers, as Lightning's
/// LearningRateMonitor does. Logged through view.log_metrics at state().global_step.
///
/// Keys: a scheduler's LRSchedulerConfig::name when set, else "lr-opt<i>" for the i-th
/// scheduler (schedulers are taken to be listed in the order of their optimizers,
/// scheduler i driving optimizer i, as configure_optimizers returns them); a second
/// use of one name gets "-1", "-2", ... appended. An optimizer with several parameter
/// groups logs one key per group with the suffix "/pg1", "/pg2", ... (1-based, as in
/// Lightning). Momentum keys append "-momentum" (SGD and RMSprop: momentum; Adam and
/// AdamW: beta1; other optimizers: 0).
///
/// When: schedulers with Interval::kStep at on_train_batch_end (once per optimizer
/// step: batches that only accumulate gradients log nothing new), schedulers with
/// Interval::kEpoch at on_train_epoch_start. `logging_interval` kStep or kEpoch logs
/// every scheduler at that hook instead. Without schedulers, the optimizers' current
/// rates are logged at on_train_batch_end (at on_train_epoch_start with kEpoch).
class LearningRateMonitor : public Callback {
 public:
  /// `logging_interval`: nullopt follows each scheduler's own interval.
  explicit LearningRateMonitor(std::optional<Interval> logging_interval = std::nullopt,
                               bool log_momentum = false);

  /// "LearningRateMonitor".
  std::string state_key() const override { return "LearningRateMonitor"; }
  /// Throws volt::ConfigError when fitting without loggers (nothing would record the
  /// rates). Other stages are accepted: the monitor does nothing there.
  void setup(TrainerView& view, Stage stage) override;
  /// Logs step-interval rates once per optimizer step.
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch,
                          int64_t batch_idx) override;
  /// Logs epoch-interval rates.
  void on_train_epoch_start(TrainerView& view) override;

  std::optional<Interval> logging_interval() const { return logging_interval_; }
  bool log_momentum() const { return log_momentum_; }

 private:
  MetricMap collect(const TrainerView& view, Interval hook) const;

  std::optional<Interval> logging_interval_;
  bool log_momentum_;
  int64_t last_logged_step_ = -1;
};

}  // namespace volt::callbacks
