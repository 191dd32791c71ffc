#pragma once
#include <cstdint>

#include "volt/loops/loop.h"

namespace volt::loops {

/// Runs the validation or test batches once: eval mode, no gradients, the
/// *_start/_epoch_*/_batch_*/_end hooks in Lightning's order, epoch aggregates of
/// what the steps logged. Restores training mode afterwards.
class EvaluationLoop : public Loop {
 public:
  /// `stage`: kValidating, kSanityChecking or kTesting.
  EvaluationLoop(LoopContext& ctx, RunningStage stage) : Loop(ctx), stage_(stage) {}
  /// Runs at most `max_batches` batches of `loader`; returns the epoch metrics it logged.
  MetricMap run(data::DataLoader& loader, int64_t max_batches);

 private:
  RunningStage stage_;
};

}  // namespace volt::loops
