#pragma once
#include <memory>
#include <string>
#include <vector>

#include "volt/callbacks/callback.h"
#include "volt/core/checkpoint.h"
#include "volt/core/module.h"
#include "volt/core/optimizer_config.h"
#include "volt/core/trainer_state.h"
#include "volt/core/trainer_view.h"
#include "volt/strategies/strategy.h"

namespace volt::connectors {

/// What a checkpoint is taken from and restored into.
struct CheckpointParts {
  Module& module;
  std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers;
  std::vector<LRSchedulerConfig>& lr_schedulers;
  TrainerState& state;
  const std::vector<std::shared_ptr<callbacks::Callback>>& callbacks;
  TrainerView& view;
};

/// Builds checkpoints from a run's parts and restores them: model, optimizers, LR
/// schedulers, precision state, loop progress, RNG state, callback state, hyperparameters,
/// versions. Files are read and written through the strategy (and its CheckpointIO).
class CheckpointConnector {
 public:
  explicit CheckpointConnector(strategies::Strategy& strategy) : strategy_(strategy) {}

  /// Everything needed to resume (or only the weights).
  Checkpoint dump(const CheckpointParts& parts, bool weights_only, const std::string& logger_version) const;
  /// dump + write (rank 0 writes; every rank calls).
  void save(const CheckpointParts& parts, const std::string& path, bool weights_only,
            const std::string& logger_version) const;
  /// Reads a checkpoint file (its integrity checked by the CheckpointIO), then its format version and
  /// progress counters (validate_progress), before anything is restored from it.
  Checkpoint load(const std::string& path) const;
  /// Throws one CheckpointError listing every progress counter (epoch, global_step, the loops' counters,
  /// the LR schedulers' last_epoch) that is missing, not a whole number or below 0. The loop position read
  /// is meta["volt"]["loops"] (for a Lightning file, derived from its loops when read).
  static void validate_progress(const Checkpoint& checkpoint, const std::string& path);
  /// The checkpoint's meta["volt"] (format version, exact loop position, weights_only, metrics, logger
  /// version), or a null JSON value when it has none.
  static const nlohmann::json& volt_section(const Checkpoint& checkpoint);
  /// Copies the checkpoint's weights into the module. Every parameter and buffer must be
  /// present with the same shape and dtype, and nothing else; otherwise nothing is copied and
  /// one CheckpointError lists what is missing, unexpected, or differs (name, checkpoint, module).
  static void restore_module(Module& module, const Checkpoint& checkpoint, const std::string& path);
  /// Restores optimizers, schedulers, precision, loop progress, RNG and callbacks.
  void restore_training_state(const CheckpointParts& parts, const Checkpoint& checkpoint,
                              const std::string& path) const;

 private:
  strategies::Strategy& strategy_;
};

}  // namespace volt::connectors
