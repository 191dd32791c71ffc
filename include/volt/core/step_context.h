#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "volt/core/optimizer_config.h"
#include "volt/core/types.h"

namespace volt {

/// How ctx.log records a value. Unset on_step/on_epoch take Lightning's defaults:
/// in training_step on_step=true, on_epoch=false; in validation/test steps
/// on_step=false, on_epoch=true.
struct LogOptions {
  /// Show in the progress bar.
  bool prog_bar = false;
  /// Send to the loggers.
  bool logger = true;
  std::optional<bool> on_step;
  std::optional<bool> on_epoch;
  /// Epoch reduction: "mean" (weighted by batch size), "sum", "max", "min".
  std::string reduce_fx = "mean";
  /// Reduce across processes before the value is used (no-op on one process).
  bool sync_dist = false;
  /// Weight of this value in the epoch mean; default: size(0) of the batch's first tensor.
  std::optional<int64_t> batch_size;
};

/// What a step receives besides its batch: where it is, a way to log, and, for manual
/// optimization, the optimizers and a backward that respects precision and strategy.
/// It replaces Lightning's `self.log` / `self.trainer`: a step never sees the Trainer.
class StepContext {
 public:
  virtual ~StepContext() = default;

  /// Records a scalar metric for this step and/or the epoch aggregate.
  virtual void log(const std::string& name, const at::Tensor& value, const LogOptions& options = {}) = 0;
  /// Same, for a plain number.
  void log(const std::string& name, double value, const LogOptions& options = {});

  virtual RunningStage stage() const = 0;
  virtual int64_t batch_idx() const = 0;
  virtual int64_t current_epoch() const = 0;
  /// Optimizer steps taken so far in this fit.
  virtual int64_t global_step() const = 0;
  virtual bool is_global_zero() const = 0;
  virtual int64_t world_size() const = 0;

  // --- manual optimization (Module::set_automatic_optimization(false)) ---
  /// The optimizers from configure_optimizers, in order.
  virtual const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const = 0;
  virtual const std::vector<LRSchedulerConfig>& lr_schedulers() const = 0;
  /// loss.backward() through the precision plug-in and strategy (scaling, gradient sync).
  virtual void manual_backward(const at::Tensor& loss) = 0;
  /// Steps optimizer i through the precision plug-in (unscale, skip on inf, clip) and
  /// counts a global step. Gradient clipping set on the Trainer applies.
  virtual void optimizer_step(size_t i) = 0;
  /// Zeroes optimizer i's gradients.
  virtual void optimizer_zero_grad(size_t i) = 0;
};

}  // namespace volt
