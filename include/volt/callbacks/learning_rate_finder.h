#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"

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

/// Sweeps the learning rate over the fit it is part of and records the loss (Lightning's
/// LearningRateFinder callback and its _LRCallback): at every optimizer step the learning rate of
/// every parameter group of the single optimizer is set to lr_finder_rate(step), the loss smoothed
/// (LRFinderCurve) and the fit asked to stop after num_training_steps steps or when the loss diverges.
/// At the end of the fit (or when it throws) the optimizer's state and learning rates are put back
/// exactly as they were at on_fit_start.
///
/// Unlike Lightning's callback it does not go on to train in the same fit: a callback never drives the
/// Trainer in Volt. volt::Tuner::lr_find runs a fit of its own with this callback, restores the
/// module and the random generators, and returns the result; `--tuner.lr_find true` does that before fit.
///
/// Distributed: rank 0's decision to stop is broadcast after every step, and at the end of the fit
/// rank 0's learning rates and losses replace every rank's, so every rank suggests the same rate.
class LearningRateFinder : public Callback {
 public:
  /// Throws ConfigError for invalid options (check_lr_finder_options).
  explicit LearningRateFinder(LearningRateFinderOptions options = {});
  ~LearningRateFinder() override;

  /// "LearningRateFinder".
  std::string state_key() const override { return "LearningRateFinder"; }
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

}  // namespace volt::callbacks
