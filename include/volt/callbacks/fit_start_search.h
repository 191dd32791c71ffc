#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>

#include "volt/callbacks/callback.h"
#include "volt/core/module.h"
#include "volt/core/trainer_options.h"

namespace volt::callbacks {

/// One short fit that a search asks for: `max_steps` optimizer steps with `callback` as the only
/// callback, at `batch_size` (the DataModule's; nullopt: as it is).
struct SearchTrial {
  int64_t max_steps = 1;
  std::shared_ptr<Callback> callback;
  std::optional<int64_t> batch_size;
};

/// How a trial ended, as the Trainer that ran it saw it.
struct SearchTrialOutcome {
  /// The trial's fit failed with an out-of-memory error (is_out_of_memory).
  bool out_of_memory = false;
  /// One batch at the trial's size holds the whole training set (growing further changes nothing).
  bool whole_training_set = false;
};

/// A callback that asks for a search before the fit it is added to trains (Lightning's
/// LearningRateFinder and BatchSizeFinder, which run lr_find / scale_batch_size at on_fit_start).
/// A callback never drives the Trainer: the Trainer, at the start of fit and before any hook, asks
/// each of its callbacks that is a FitStartSearch for trials and runs them, each a short fit of a
/// Trainer of its own (search_trial_options), putting the module's parameters, buffers, gradients,
/// train/eval mode and the random generator back after each; then the fit trains from its start.
/// Every rank calls the same methods in the same order.
class FitStartSearch {
 public:
  virtual ~FitStartSearch() = default;
  /// A new search of `module` before a fit; `batch_size`: the DataModule's (nullopt: none, or the fit
  /// was given loaders). A ConfigError here (e.g. nothing to search) stops the fit before any step.
  virtual void begin_search(Module& module, std::optional<int64_t> batch_size) = 0;
  /// The next trial to run, or nullopt when the search is over.
  virtual std::optional<SearchTrial> next_trial() = 0;
  /// How the trial next_trial() gave last ended.
  virtual void end_trial(const SearchTrialOutcome& outcome) = 0;
  /// The search is over and the module put back: write its result (e.g. into the hyperparameters).
  virtual void end_search(Module& module) = 0;
  /// The batch size the DataModule is to train with (nullopt: leave it).
  virtual std::optional<int64_t> chosen_batch_size() const { return std::nullopt; }
};

/// The options of a search's short fit, made from the fit's `options`: max_steps = `max_steps`, no
/// epoch limit, no validation or sanity check, no loggers, checkpoints, progress bar, summary or
/// profiler, and no tuner options.
TrainerOptions search_trial_options(const TrainerOptions& options, int64_t max_steps);

/// True for an out-of-memory error, which a batch-size trial counts as "does not fit": LibTorch's
/// c10::OutOfMemoryError (CUDA's caching allocator), volt::OutOfMemoryError (what a Trainer stage makes
/// of it), and the messages of Lightning's is_oom_error ("CUDA out of memory", "CUDA error: out of
/// memory", "CUDNN_STATUS_NOT_SUPPORTED") and of LibTorch's CPU allocator ("DefaultCPUAllocator: can't
/// allocate memory"). Anything else is not.
bool is_out_of_memory(const std::exception& error);

}  // namespace volt::callbacks
