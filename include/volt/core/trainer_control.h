#pragma once
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/core/optimizer_config.h"
#include "volt/core/trainer_view.h"

namespace volt {

/// Requests beyond TrainerView's that change the training routine itself, for the few
/// callbacks that must (weight averaging: Lightning's callbacks reach into the trainer for
/// the same). The Trainer's view implements them; a callback gets them with
/// TrainerControl::of(view, "<callback>"). Every request runs during fit only.
class TrainerControl {
 public:
  virtual ~TrainerControl() = default;

  /// The control of the Trainer behind `view`. Throws NotSupportedError naming `who` when
  /// `view` is not a Trainer's (e.g. a test's stand-in view).
  static TrainerControl& of(TrainerView& view, const std::string& who);

  /// Replaces the LR schedulers the fit loop steps from now on, and that checkpoints save
  /// (StochasticWeightAveraging swaps in its SWALR, as Lightning's does). Throws
  /// ConfigError for a config without a scheduler or with a frequency below 1.
  virtual void set_lr_schedulers(std::vector<LRSchedulerConfig> schedulers) = 0;
  /// Runs training_step over one pass of this rank's training data (limit_train_batches
  /// applies, in the order of the current epoch), in train mode, without gradients, under
  /// the precision's forward context: no backward, optimizer or scheduler step, no hooks,
  /// and what the step logs is dropped. What re-estimates batch-norm statistics after weight
  /// averaging. Every rank calls it.
  virtual void forward_training_data() = 0;
  /// The element-wise mean of a floating-point `tensor` over all ranks, on every rank (e.g.
  /// batch-norm statistics each rank estimated on its part of the data). A collective:
  /// every rank calls it. One process: `tensor`.
  virtual at::Tensor all_reduce_mean(const at::Tensor& tensor) = 0;
};

}  // namespace volt
