#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "volt/callbacks/callback.h"
#include "volt/callbacks/fit_start_search.h"

namespace volt::callbacks {

/// Bytes of CPU tensor memory, as Volt's counting CPU allocator sees them. The allocator wraps
/// LibTorch's default CPU allocator from the first call of track_cpu_memory() on, for the rest of the
/// process; memory allocated before that is not counted.
struct CpuMemoryStats {
  int64_t live = 0;  ///< allocated now (since tracking began)
  int64_t peak = 0;  ///< the most live at once since the last reset_cpu_memory_peak()
};

/// Starts counting (idempotent; thread-safe). Every CPU tensor allocated afterwards is counted.
void track_cpu_memory();
/// The counts now (zeros before track_cpu_memory()).
CpuMemoryStats cpu_memory();
/// Sets peak to live.
void reset_cpu_memory_peak();
/// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read).
int64_t available_system_memory();

/// One trial of the batch-size finder, as the only callback of the short fit it runs in
/// (volt::Tuner::scale_batch_size and the BatchSizeFinder callback run one short fit per batch size
/// with it). It watches the CPU memory the fit allocates (cpu_memory().peak above what was live at
/// on_fit_start) and, with a budget, stops the fit as soon as a training step went over it: the trial
/// then counts as out of memory. At the end of the fit the optimizer is put back as it was at
/// on_fit_start. Distributed: a trial is over budget when it is on any rank.
class BatchSizeTrial : public Callback {
 public:
  /// `budget_bytes`: the most CPU memory a trial may add; 0: no budget (only real out-of-memory
  /// errors count). Negative: ConfigError.
  explicit BatchSizeTrial(int64_t budget_bytes = 0);
  ~BatchSizeTrial() override;

  /// "BatchSizeTrial".
  std::string state_key() const override { return "BatchSizeTrial"; }
  void on_fit_start(TrainerView& view) override;
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch, int64_t batch_idx) override;
  void on_fit_end(TrainerView& view) override;
  void on_exception(TrainerView& view, const std::exception& error) override;

  int64_t budget_bytes() const { return budget_; }
  /// The most CPU memory the last trial added at once.
  int64_t peak_bytes() const { return peak_; }
  /// True when the last trial went over the budget (on any rank).
  bool over_budget() const { return over_; }

 private:
  void measure();
  void restore();

  int64_t budget_;
  int64_t base_ = 0;
  int64_t peak_ = 0;
  bool over_ = false;
  struct Snapshot;
  std::unique_ptr<Snapshot> snapshot_;
};

/// The batch-size finder's options (Lightning's scale_batch_size arguments, plus the CPU budget).
struct BatchSizeFinderOptions {
  /// "power": double until a trial fails; "binsearch": then halve the gap between the last size that
  /// worked and the first that failed.
  std::string mode = "power";
  /// Optimizer steps per trial.
  int64_t steps_per_trial = 3;
  int64_t init_val = 2;
  int64_t max_trials = 25;
  /// CPU memory a trial may allocate above what was live when it started, in bytes (cpu_memory()).
  /// 0: memory_fraction of the machine's available memory.
  int64_t memory_budget_bytes = 0;
  /// Used when memory_budget_bytes is 0; in (0, 1].
  double memory_fraction = 0.9;
};

/// ConfigError naming `what`, the option and the value, with a fix, for an option out of range.
void check_batch_size_finder_options(const BatchSizeFinderOptions& options, const std::string& what);
/// The CPU budget of a trial in bytes: memory_budget_bytes, or memory_fraction of the available memory.
int64_t batch_size_budget(const BatchSizeFinderOptions& options);

/// Lightning's _run_power_scaling and _run_binary_scaling as a sequence of sizes to try: next() gives
/// the size of the next trial (nullopt: done), report() how it went. `power` doubles from init_val
/// until a trial fails; `binsearch` then halves the gap between the last size that fit and the first
/// that failed. Growth stops once one batch holds the whole training set, and after max_trials.
class BatchSizeSearch {
 public:
  /// Options as check_batch_size_finder_options accepts them.
  explicit BatchSizeSearch(const BatchSizeFinderOptions& options);
  std::optional<int64_t> next() const;
  /// `fits`: the trial at next()'s size worked; `whole_training_set`: one batch at it holds the whole set.
  void report(bool fits, bool whole_training_set);
  /// The largest size that fit (0: none yet).
  int64_t largest() const { return largest_; }

 private:
  bool binsearch_;
  int64_t max_trials_;
  int64_t size_;
  int64_t trials_ = 0;
  int64_t low_ = 1, high_ = 0, count_ = 0;
  bool any_success_ = false;
  bool done_ = false;
  int64_t largest_ = 0;
};

/// Finds the largest batch size at the start of the fit it is added to, sets it and lets that fit
/// train (Lightning's BatchSizeFinder callback). Before the fit's first hook the Trainer runs the
/// trials (BatchSizeSearch, each a short fit with a BatchSizeTrial, as Tuner::scale_batch_size does),
/// puts the module and the random generator back after each, sets the DataModule's batch size to the
/// largest that fit, and then trains for max_epochs/max_steps from the start at that size.
/// A fit given loaders, or a DataModule without batch_size(): ConfigError before any step; no size fits:
/// volt::Error, the batch size left as it was.
class BatchSizeFinder : public Callback, public FitStartSearch {
 public:
  /// Throws ConfigError for invalid options (check_batch_size_finder_options).
  explicit BatchSizeFinder(BatchSizeFinderOptions options = {});
  ~BatchSizeFinder() override;

  /// "BatchSizeFinder".
  std::string state_key() const override { return "BatchSizeFinder"; }

  void begin_search(Module& module, std::optional<int64_t> batch_size) override;
  std::optional<SearchTrial> next_trial() override;
  void end_trial(const SearchTrialOutcome& outcome) override;
  void end_search(Module& module) override;
  std::optional<int64_t> chosen_batch_size() const override;

  const BatchSizeFinderOptions& options() const { return options_; }
  /// The size the last search chose (Lightning's optimal_batch_size); nullopt before one.
  std::optional<int64_t> optimal_batch_size() const { return optimal_; }

 private:
  BatchSizeFinderOptions options_;
  int64_t budget_ = 0;
  std::optional<BatchSizeSearch> search_;
  std::shared_ptr<BatchSizeTrial> trial_;
  std::optional<int64_t> optimal_;
};

}  // namespace volt::callbacks
