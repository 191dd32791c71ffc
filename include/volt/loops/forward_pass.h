#pragma once
#include "volt/loops/loop.h"

namespace volt::loops {

/// One pass of this rank's training data through training_step, with nothing learnt:
/// train mode, no gradients, the precision's forward context, no backward, optimizer step,
/// scheduler step or hook, and what the step logs dropped (manual optimization's calls
/// are ignored). Runs state.num_training_batches batches of the epoch state.current_epoch's
/// order. What TrainerView::forward_training_data does: weight averaging re-estimates
/// batch-norm statistics with it, as torch.optim.swa_utils.update_bn does with the model.
class ForwardPass : public Loop {
 public:
  using Loop::Loop;
  /// The batches it ran.
  int64_t run();
};

}  // namespace volt::loops
