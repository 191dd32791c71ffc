#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "volt/core/lr_scheduler.h"
#include "volt/core/types.h"

namespace volt {

/// An LR scheduler and when it steps (Lightning's lr_scheduler_config).
struct LRSchedulerConfig {
  std::shared_ptr<LRScheduler> scheduler;
  /// kEpoch: after every `frequency` training epochs; kStep: after every `frequency`
  /// optimizer steps.
  Interval interval = Interval::kEpoch;
  int64_t frequency = 1;
  /// Name under which LearningRateMonitor logs it; empty: "lr-<optimizer index>".
  std::string name;
};

/// What Module::configure_optimizers returns: one or more optimizers and their
/// schedulers. Converts implicitly from a single optimizer.
struct OptimizerConfig {
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers;
  std::vector<LRSchedulerConfig> lr_schedulers;

  OptimizerConfig() = default;
  template <typename O>
  OptimizerConfig(std::shared_ptr<O> optimizer)  // NOLINT: implicit on purpose
      : optimizers{std::move(optimizer)} {}
  template <typename O>
  OptimizerConfig(std::shared_ptr<O> optimizer, LRSchedulerConfig scheduler)
      : optimizers{std::move(optimizer)}, lr_schedulers{std::move(scheduler)} {}
};

}  // namespace volt
