#pragma once
#include <array>
#include <functional>
#include <optional>
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Lightning's Timer: the time spent in training, validation and testing, and a stop once
/// training has run for `duration` seconds. The Trainer adds one (interval "step") for the
/// max_time flag unless the callbacks already hold a Timer.
///
/// What is timed: training from on_train_start to on_train_end, validation and testing
/// from their on_*_start to on_*_end (the last run of each; a sanity check counts as
/// validation, as in Lightning). Training time is kept in checkpoints (state_dict): a run
/// resumed from one counts the time already spent towards `duration`.
///
/// When it checks: at on_train_start (a resumed run whose time is spent stops before its
/// first batch), then at every on_train_batch_end (interval kStep: the stop takes effect
/// after the batch in which the time ran out, its validation first, as any stop) or every
/// on_train_epoch_end (kEpoch). The stop goes through TrainerView::request_stop, so
/// min_epochs/min_steps hold it back as they hold back any stop, and ModelCheckpoint saves
/// as it does at any stop. Without a duration it only measures, at no cost per step.
///
/// Ranks: every rank measures; the decision goes through reduce_boolean_decision(any), so
/// all ranks stop after the same batch (one boolean all-reduce per check under DDP).
class Timer : public Callback {
 public:
  enum class Interval { kStep, kEpoch };
  /// Seconds on a monotonic clock (tests pass their own).
  using Clock = std::function<double()>;

  /// `duration_s`: seconds of training before a stop (>= 0); unset: measure only.
  /// Throws ConfigError for a negative or non-finite duration.
  explicit Timer(std::optional<double> duration_s = std::nullopt, Interval interval = Interval::kStep,
                 bool verbose = true, Clock clock = {});
  /// Lightning's spelling: `duration` "DD:HH:MM:SS" or seconds ("" : measure only),
  /// `interval` "step" or "epoch". Throws ConfigError naming the value and the choices.
  Timer(const std::string& duration, const std::string& interval, bool verbose = true, Clock clock = {});

  /// When `stage` (kTraining, kValidating, kTesting) last started / ended, in the clock's
  /// seconds; unset if it has not.
  std::optional<double> start_time(RunningStage stage = RunningStage::kTraining) const;
  std::optional<double> end_time(RunningStage stage = RunningStage::kTraining) const;
  /// Seconds spent in `stage` (up to now while it runs); for training, plus the time a
  /// restored checkpoint had counted.
  double time_elapsed(RunningStage stage = RunningStage::kTraining) const;
  /// duration - time_elapsed(stage); unset without a duration.
  std::optional<double> time_remaining(RunningStage stage = RunningStage::kTraining) const;
  std::optional<double> duration() const { return duration_; }
  Interval interval() const { return interval_; }

  /// "Timer" (Lightning's key).
  std::string state_key() const override { return "Timer"; }
  /// {"time_elapsed": {"train": s, "sanity_check": s, "validate": s, "test": s, "predict": s}}.
  nlohmann::json state_dict() const override;
  /// Takes time_elapsed.train as time already spent (absent: 0). Throws CheckpointError
  /// for a value that is not a non-negative number.
  void load_state_dict(const nlohmann::json& state) override;

  void on_train_start(TrainerView& view) override;
  void on_train_end(TrainerView&) override { mark(end_, RunningStage::kTraining); }
  void on_validation_start(TrainerView&) override;
  void on_validation_end(TrainerView&) override { mark(end_, RunningStage::kValidating); }
  void on_test_start(TrainerView&) override;
  void on_test_end(TrainerView&) override { mark(end_, RunningStage::kTesting); }
  void on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) override;
  void on_train_epoch_end(TrainerView& view) override;

 private:
  using Times = std::array<std::optional<double>, 6>;  // by RunningStage
  void mark(Times& times, RunningStage stage) { times[static_cast<size_t>(stage)] = now(); }
  void start(RunningStage stage);
  double now() const;
  void check_time_remaining(TrainerView& view);

  std::optional<double> duration_;
  Interval interval_;
  bool verbose_;
  Clock clock_;
  Times start_{}, end_{};
  double offset_ = 0;
};

}  // namespace volt::callbacks
