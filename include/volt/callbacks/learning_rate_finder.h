#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/callbacks/fit_start_search.h"

namespace volt::callbacks {

/// How the learning rate grows over the sweep (Lightning's lr_find `mode`).
enum class LRFinderMode { kExponential, kLinear };

/// "exponential" or "linear" to the mode; a ConfigError naming `flag` and the value otherwise.
LRFinderMode parse_lr_finder_mode(const std::string& text, const std::string& flag = "mode");
const char* to_string(LRFinderMode mode);

/// The sweep of Lightning 2.2.5's learning-rate finder.
struct LearningRateFinderOptions {
  double min_lr = 1e-8;
  double max_lr = 1.0;
  /// Optimizer steps of the sweep (Lightning's num_training / num_training_steps).
  int64_t num_training_steps = 100;
  LRFinderMode mode = LRFinderMode::kExponential;
  /// Stop when the smoothed loss exceeds this times the best smoothed loss so far; nullopt: never.
  std::optional<double> early_stop_threshold = 4.0;
};

/// Throws ConfigError naming the option, the value and a fix: min_lr and max_lr finite with
/// 0 < min_lr < max_lr, num_training_steps >= 1, early_stop_threshold finite and > 0 when set.
void check_lr_finder_options(const LearningRateFinderOptions& options);

/// The learning rate of optimizer step `step` (0-based) of the sweep, as Lightning's _ExponentialLR
/// and _LinearLR give it when stepped after every optimizer step: step 0 uses min_lr; step k >= 1 uses
/// r = (k + 1) / num_training_steps, min_lr * (max_lr / min_lr)^r (exponential) or
/// min_lr + r * (max_lr - min_lr) (linear). (Lightning's schedulers skip r = 1 / num_training.)
double lr_finder_rate(const LearningRateFinderOptions& options, int64_t step);

/// Lightning's suggestion: the index into `losses` of the steepest descent of the curve. The losses
/// losses[skip_begin : len - skip_end] (Python's slice, so skip_end = 0 selects none) with the non-finite
/// ones dropped are differentiated as torch.gradient does in float32 (central differences inside,
/// one-sided at the ends); the first minimum's position plus skip_begin is returned. nullopt when fewer
/// than 2 losses remain. (As in Lightning, dropped non-finite losses before the minimum shift the index.)
std::optional<size_t> lr_finder_suggestion_index(const std::vector<double>& losses, int64_t skip_begin = 10,
                                                 int64_t skip_end = 1);

/// The loss smoothing and divergence test of Lightning's _LRCallback, one optimizer step at a time.
class LRFinderCurve {
 public:
  explicit LRFinderCurve(std::optional<double> early_stop_threshold = 4.0, double beta = 0.98)
      : threshold_(early_stop_threshold), beta_(beta) {}
  /// Adds the raw loss of the step after which global_step is `global_step` (1 for the first) and
  /// returns its smoothed value, avg / (1 - beta^(global_step + 1)) with avg the running average
  /// beta * avg + (1 - beta) * loss. Non-finite losses enter the average as they are (as Lightning's).
  double add(double loss, int64_t global_step);
  /// True once a smoothed loss after global step 1 exceeded early_stop_threshold x the best one.
  bool diverged() const { return diverged_; }
  const std::vector<double>& smoothed() const { return smoothed_; }

 private:
  std::optional<double> threshold_;
  double beta_;
  double avg_ = 0.0;
  double best_ = 0.0;
  bool diverged_ = false;
  std::vector<double> smoothed_;
};

/// The sweep of the learning-rate finder, as a callback of the short fit it runs in (Lightning's
/// _LRCallback with its _ExponentialLR/_LinearLR): at every optimizer step the learning rate of
/// every parameter group of the single optimizer is set to lr_finder_rate(step), the loss smoothed
/// (LRFinderCurve) and the fit asked to stop after num_training_steps steps or when the loss diverges.
/// At the end of the fit (or when it throws) the optimizer's state and learning rates are put back
/// exactly as they were at on_fit_start. volt::Tuner::lr_find and the LearningRateFinder callback run
/// a fit of its own with it.
///
/// Distributed: rank 0's decision to stop is broadcast after every step, and at the end of the fit
/// rank 0's learning rates and losses replace every rank's, so every rank suggests the same rate.
class LearningRateSweep : public Callback {
 public:
  /// Throws ConfigError for invalid options (check_lr_finder_options).
  explicit LearningRateSweep(LearningRateFinderOptions options = {});
  ~LearningRateSweep() override;

  /// "LearningRateSweep".
  std::string state_key() const override { return "LearningRateSweep"; }
  /// ConfigError unless the module has exactly one optimizer; keeps its state, sets min_lr.
  void on_fit_start(TrainerView& view) override;
  void on_train_batch_start(TrainerView& view, const Batch& batch, int64_t batch_idx) override;
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch, int64_t batch_idx) override;
  /// Restores the optimizer; makes rank 0's curve every rank's.
  void on_fit_end(TrainerView& view) override;
  /// Restores the optimizer.
  void on_exception(TrainerView& view, const std::exception& error) override;

  const LearningRateFinderOptions& options() const { return options_; }
  /// The learning rate of every recorded step, and its smoothed loss (NaN for a step whose
  /// training_step returned no loss).
  const std::vector<double>& lrs() const { return lrs_; }
  const std::vector<double>& losses() const { return losses_; }
  /// True when the sweep stopped because the loss diverged.
  bool stopped_early() const { return stopped_early_; }

 private:
  void restore();

  LearningRateFinderOptions options_;
  LRFinderCurve curve_;
  std::vector<double> lrs_, losses_;
  double pending_lr_ = 0.0;
  int64_t last_step_ = 0;
  int64_t first_step_ = 0;
  bool stopped_early_ = false;
  /// The optimizer as it was at on_fit_start (src/callbacks/detail/optimizer_snapshot.h).
  struct Snapshot;
  std::unique_ptr<Snapshot> snapshot_;
};

/// Finds a learning rate at the start of the fit it is added to, applies it and lets that fit train
/// (Lightning's LearningRateFinder callback). Before the fit's first hook the Trainer runs the sweep
/// (LearningRateSweep, a short fit of its own, as Tuner::lr_find does) and puts the module, its
/// optimizer and the random generator back; with update_attr the suggestion is written into the
/// module's hyperparameters under attr_name (as Tuner::lr_find's update_attr), and at on_fit_start it
/// becomes the learning rate of every parameter group of the fit's optimizer. The fit then trains
/// for max_epochs/max_steps from its start: the sweep's steps are not the fit's.
/// Every fit it is part of sweeps again. No suggestion (too few losses): the fit keeps its rate.
class LearningRateFinder : public Callback, public FitStartSearch {
 public:
  /// Throws ConfigError for invalid options (check_lr_finder_options).
  explicit LearningRateFinder(LearningRateFinderOptions options = {}, bool update_attr = true,
                              std::string attr_name = "");
  ~LearningRateFinder() override;

  /// "LearningRateFinder".
  std::string state_key() const override { return "LearningRateFinder"; }
  /// Sets the suggestion as the learning rate of the fit's optimizer (ConfigError unless there is
  /// exactly one).
  void on_fit_start(TrainerView& view) override;

  /// With update_attr: ConfigError when the hyperparameters hold neither attr_name nor lr /
  /// learning_rate (as Lightning's).
  void begin_search(Module& module, std::optional<int64_t> batch_size) override;
  std::optional<SearchTrial> next_trial() override;
  void end_trial(const SearchTrialOutcome& outcome) override;
  void end_search(Module& module) override;

  const LearningRateFinderOptions& options() const { return options_; }
  /// The last sweep (nullptr before the first fit): its rates, smoothed losses and stop.
  const LearningRateSweep* sweep() const { return sweep_.get(); }
  /// The last sweep's suggestion (Lightning's optimal_lr.suggestion()); nullopt before a sweep or
  /// when it made none.
  std::optional<double> optimal_lr() const { return optimal_lr_; }

 private:
  LearningRateFinderOptions options_;
  bool update_attr_;
  std::string attr_name_;
  std::string attr_;  // the hyperparameter written, chosen at begin_search
  std::shared_ptr<LearningRateSweep> sweep_;
  bool pending_ = false;
  std::optional<double> optimal_lr_;
};

/// update_attr's key: `attr_name`, or the first of "lr", "learning_rate" that the module's
/// hyperparameters hold; ConfigError naming `what` otherwise.
std::string lr_attr_name(const Module& module, const std::string& attr_name, const std::string& what);

}  // namespace volt::callbacks
