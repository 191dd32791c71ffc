#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/core/types.h"

namespace volt::callbacks {

/// Logs learning rates (and optionally momenta) to the loggers, as Lightning 2.2's
/// LearningRateMonitor does, through view.log_metrics at state().batches_that_stepped
/// (the step the logger connector uses), without an "epoch" column.
///
/// Keys, Lightning's: "lr-<optimizer class>" ("lr-Adam", "lr-SGD"; a user's optimizer
/// subclass by its own class name), or an LRSchedulerConfig::name when set. Schedulers are
/// named first, in order, then the optimizers no scheduler drives; the second and later
/// unnamed uses of one optimizer class get "-1", "-2", ... ("lr-Adam", "lr-Adam-1"). An
/// optimizer with several parameter groups logs one key per group, "/pg1", "/pg2", ....
/// Momentum keys append "-momentum" (SGD and RMSprop: momentum; Adam and AdamW: beta1;
/// other optimizers: 0, with a warning once at on_train_start).
///
/// When: at on_train_batch_start when volt::should_update_logs (every log_every_n_steps
/// steps, and every batch once a stop is requested): the rates of step-interval
/// schedulers; at on_train_epoch_start: those of epoch-interval schedulers. Optimizers
/// without a scheduler are logged at both. `logging_interval` kStep or kEpoch logs every
/// rate at that hook only.
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
  /// With log_momentum: warns once (rank 0) when an optimizer has no momentum.
  void on_train_start(TrainerView& view) override;
  /// Logs step-interval rates on logging steps.
  void on_train_batch_start(TrainerView& view, const Batch& batch, int64_t batch_idx) override;
  /// Logs epoch-interval rates.
  void on_train_epoch_start(TrainerView& view) override;

  std::optional<Interval> logging_interval() const { return logging_interval_; }
  bool log_momentum() const { return log_momentum_; }
  /// The unqualified class name of `optimizer`'s dynamic type ("Adam", "SGD").
  static std::string optimizer_class_name(const torch::optim::Optimizer& optimizer);

 private:
  struct Entry {
    const torch::optim::Optimizer* optimizer;
    std::vector<std::string> names;  // one per parameter group
    bool has_scheduler;
    Interval interval;
  };
  static std::vector<Entry> entries(const TrainerView& view);
  /// `interval` nullopt: every entry.
  MetricMap collect(const TrainerView& view, std::optional<Interval> interval) const;

  std::optional<Interval> logging_interval_;
  bool log_momentum_;
  bool warned_momentum_ = false;
};

}  // namespace volt::callbacks
