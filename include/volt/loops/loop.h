#pragma once
#include <memory>
#include <vector>

#include "volt/connectors/callback_connector.h"
#include "volt/connectors/data_connector.h"
#include "volt/connectors/logger_connector.h"
#include "volt/connectors/signal_connector.h"
#include "volt/core/module.h"
#include "volt/core/optimizer_config.h"
#include "volt/core/trainer_options.h"
#include "volt/core/trainer_state.h"
#include "volt/core/trainer_view.h"
#include "volt/loops/hooks.h"
#include "volt/strategies/strategy.h"

namespace volt::loops {

/// What every loop works with. The Trainer owns all of it; loops hold it for one stage.
struct LoopContext {
  const TrainerOptions& options;  ///< already validated (and adjusted for fast_dev_run)
  TrainerState& state;
  Module& module;
  strategies::Strategy& strategy;
  connectors::CallbackConnector& callbacks;
  connectors::LoggerConnector& logger;
  connectors::DataConnector& data;
  TrainerView& view;
  std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers;
  std::vector<LRSchedulerConfig>& lr_schedulers;
  /// Termination signals caught during fit (nullptr outside fit).
  connectors::SignalConnector* signals = nullptr;
  /// Every hook and loop action goes through it (and so through the profiler, when one is set).
  Hooks hooks;
  /// options.gradient_clip_algorithm resolved before the stage: the step path compares no strings.
  precision::ClipAlgorithm gradient_clip_algorithm = precision::ClipAlgorithm::kNorm;
};

/// A loop runs one level of a stage (an epoch, the batches of an evaluation, ...). The base
/// only holds the stage's context: loops are the Trainer's own machinery, built by it for each
/// stage, not an extension point (Lightning 2.x made its loops private for the same reason).
/// Users change what a stage does through the module's hooks, callbacks and strategies.
class Loop {
 public:
  explicit Loop(LoopContext& ctx) : ctx_(ctx) {}
  virtual ~Loop() = default;

 protected:
  LoopContext& ctx_;
};

}  // namespace volt::loops
