#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "volt/core/module.h"
#include "volt/data/datamodule.h"
#include "volt/trainer/trainer.h"
#include "volt/tuner/lr_finder_result.h"

namespace volt::tuner {

/// Tuner::lr_find's options (Lightning's Tuner.lr_find arguments).
struct LRFindOptions {
  double min_lr = 1e-8;
  double max_lr = 1.0;
  int64_t num_training = 100;
  /// "exponential" or "linear".
  std::string mode = "exponential";
  /// Stop when the smoothed loss exceeds this times the best one; nullopt: sweep to the end.
  std::optional<double> early_stop_threshold = 4.0;
  /// Write the suggestion into the module's hyperparameters (Module::hparams) under attr_name, for
  /// configure_optimizers to read (Lightning sets model.lr or model.hparams.lr).
  bool update_attr = false;
  /// "": "lr" or "learning_rate", whichever the hyperparameters hold (ConfigError when neither).
  std::string attr_name;
};

/// Tuner::scale_batch_size's options (Lightning's Tuner.scale_batch_size arguments, plus the CPU budget).
struct ScaleBatchSizeOptions {
  /// "power": double until a trial fails; "binsearch": then halve the gap between the last size that
  /// worked and the first that failed.
  std::string mode = "power";
  /// Optimizer steps per trial.
  int64_t steps_per_trial = 3;
  int64_t init_val = 2;
  int64_t max_trials = 25;
  /// Only "batch_size" (the DataModule's batch_size()/set_batch_size()).
  std::string batch_arg_name = "batch_size";
  /// CPU memory a trial may allocate above what was live when it started, in bytes, counted by the
  /// CPU allocator (callbacks::cpu_memory). 0: memory_fraction of the machine's available memory.
  int64_t memory_budget_bytes = 0;
  /// Used when memory_budget_bytes is 0; in (0, 1].
  double memory_fraction = 0.9;
};

/// Finds a learning rate and a batch size for a Trainer before fit, as Lightning's Tuner does. It drives
/// the Trainer from above, as a user does: every sweep or trial is a short fit of a Trainer of its own,
/// made with the given Trainer's options (hardware, strategy, precision, seed...) and without its
/// loggers, checkpoints and callbacks. The module's parameters, buffers, gradients and train/eval mode
/// and the CPU (and CUDA) random generators are put back bitwise afterwards, and so is the optimizer of
/// the module if configure_optimizers hands out one it keeps; the given Trainer is not touched (its step and epoch
/// counters stay as they were). Under ddp every rank calls it and gets the same answer.
class Tuner {
 public:
  explicit Tuner(Trainer& trainer) : trainer_(trainer) {}

  /// The learning-rate range test: num_training optimizer steps with the rate growing from min_lr to
  /// max_lr, the loss smoothed, stopped early when it diverges. Bad options: ConfigError before any
  /// step. fast_dev_run: skipped with a warning (rank 0), the result is empty. ddp_spawn and the
  /// other spawn launchers, and ddp in a process that starts its own ranks: NotSupportedError (start
  /// every rank with volt launch, torchrun, srun or mpirun).
  LRFinderResult lr_find(Module& module, data::DataModule& datamodule, const LRFindOptions& options = {});
  /// Same with loaders (val is not used by the sweep).
  LRFinderResult lr_find(Module& module, std::shared_ptr<data::DataLoader> train, const LRFindOptions& options = {});

  /// The largest batch size whose trial of steps_per_trial steps fits (Lightning's scale_batch_size):
  /// out of memory is a trial over the CPU budget, or an out-of-memory error (callbacks::is_out_of_memory:
  /// LibTorch's c10::OutOfMemoryError, "CUDA out of memory", "DefaultCPUAllocator: can't allocate
  /// memory"). Any other error ends the search and is rethrown, with the module and the batch size put
  /// back. The DataModule's batch size is set to the result.
  /// A DataModule without batch_size(), or bad options: ConfigError before any trial.
  int64_t scale_batch_size(Module& module, data::DataModule& datamodule, const ScaleBatchSizeOptions& options = {});

  /// What the trainer's `tuner.*` options ask for, before fit: tuner.scale_batch_size, then
  /// tuner.lr_find (with update_attr, the suggestion printed on rank 0). Returns the learning rate set
  /// (nullopt without lr_find or without a suggestion).
  std::optional<double> tune(Module& module, data::DataModule& datamodule, std::ostream& out);

 private:
  /// The options of the tuner's own short fits.
  TrainerOptions trial_options(int64_t max_steps) const;
  LRFinderResult run_lr_find(Module& module, const LRFindOptions& options, const std::function<void(Trainer&)>& fit);

  Trainer& trainer_;
};

}  // namespace volt::tuner

namespace volt {
/// Lightning's name: volt::Tuner(trainer).lr_find(model, data).
using Tuner = tuner::Tuner;
}  // namespace volt
