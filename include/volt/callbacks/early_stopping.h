#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Stops fit when a monitored metric stops improving, crosses a threshold, or becomes
/// NaN/inf, as Lightning's EarlyStopping does.
///
/// When it checks: when check_on_train_epoch_end is unset, as Lightning does: at
/// on_train_epoch_end (after the epoch's validation) when val_check_interval is 1.0 (or 1)
/// and check_val_every_n_epoch is 1, else after each validation (on_validation_end).
/// check_on_train_epoch_end true or false chooses one of the two. With check_finite, it also checks finiteness at every
/// on_train_batch_end where the monitored key is in callback_metrics (a step-level
/// training metric such as train_loss), so a NaN loss stops training within the step it
/// appeared in; that check costs one boolean all-reduce per step under DDP. Nothing is
/// checked during the sanity check, outside fit, or under fast_dev_run (as in Lightning).
///
/// Ranks: every rank evaluates; the decision goes through
/// TrainerView::reduce_boolean_decision(should_stop, all=false), so training stops on all
/// ranks when any rank asks to stop (as in Lightning). Stop is requested once per fit.
class EarlyStopping : public Callback {
 public:
  /// Lightning's EarlyStopping arguments, with its defaults.
  struct Options {
    /// Metric to watch (required).
    std::string monitor;
    /// Smallest change that counts as an improvement (a magnitude; mode gives the sign).
    double min_delta = 0.0;
    /// Checks without improvement before stopping.
    int64_t patience = 3;
    /// "min" (lower is better) or "max".
    std::string mode = "min";
    /// A check that finds no `monitor` in callback_metrics throws ConfigError (true) or
    /// is skipped with a warning printed once (false).
    bool strict = true;
    /// Stop as soon as the metric is NaN or infinite.
    bool check_finite = true;
    /// Stop once the metric is better than this.
    std::optional<double> stopping_threshold;
    /// Stop once the metric is worse than this.
    std::optional<double> divergence_threshold;
    /// Check at train epoch end (true) or after validation (false); unset: at train epoch
    /// end when validation runs once per epoch (val_check_interval 1.0, every epoch), else
    /// after validation (Lightning's rule).
    std::optional<bool> check_on_train_epoch_end;
  };

  /// Validates `options`; throws ConfigError (what, given, fix) when they are invalid.
  explicit EarlyStopping(Options options);

  /// "EarlyStopping{'monitor': 'val_loss', 'mode': 'min'}".
  std::string state_key() const override;
  /// wait_count, stopped_epoch, best_score ("inf"/"-inf" while there is none), patience.
  nlohmann::json state_dict() const override;
  /// Restores state_dict(), including patience (as Lightning does).
  void load_state_dict(const nlohmann::json& state) override;

  /// Allows one new stop request in this fit.
  void on_fit_start(TrainerView& view) override;
  /// Finiteness check of a step-level monitored metric (check_finite only).
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch,
                          int64_t batch_idx) override;
  /// Full check when checking at train epoch end.
  void on_train_epoch_end(TrainerView& view) override;
  /// Full check after validation (not during the sanity check).
  void on_validation_end(TrainerView& view) override;

  /// The options, with patience as restored by load_state_dict.
  const Options& options() const { return options_; }
  /// Checks in a row without improvement.
  int64_t wait_count() const { return wait_count_; }
  /// Best value seen; +inf ("min") or -inf ("max") before the first check.
  double best_score() const { return best_score_; }
  /// Epoch of the last check that asked to stop (0 if none did): with a stop held back by
  /// min_epochs/min_steps, the epoch the run really stops at, as in Lightning.
  int64_t stopped_epoch() const { return stopped_epoch_; }
  /// Why stop was requested, as passed to request_stop (empty if never).
  const std::string& stopping_reason() const { return stopping_reason_; }

 private:
  bool skip_check(const TrainerView& view) const;
  bool check_at_train_epoch_end(const TrainerView& view) const;
  void run_check(TrainerView& view);
  std::pair<bool, std::string> evaluate(const TrainerView& view, double current);
  std::string not_finite_reason(const TrainerView& view, double current) const;
  void finish(TrainerView& view, bool should_stop, std::string reason);
  bool is_better(double a, double b) const;

  Options options_;
  double min_delta_signed_ = 0.0;
  int64_t wait_count_ = 0;
  int64_t stopped_epoch_ = 0;
  double best_score_ = 0.0;
  std::string stopping_reason_;
  bool stop_requested_ = false;
  bool warned_missing_ = false;
};

}  // namespace volt::callbacks
