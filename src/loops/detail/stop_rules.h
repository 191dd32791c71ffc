#pragma once
// When a fit may stop early: Lightning's min_epochs/min_steps rule, shared by the fit
// loop and the training epoch loop.
#include <cstdint>

#include "volt/loops/loop.h"

namespace volt::loops::detail {

/// min_epochs as Lightning applies it: a run with min_steps and no min_epochs trains at
/// least one epoch (Lightning's min_epochs=None becomes 1 when min_steps is given; Volt's
/// 0 stands for None).
inline int64_t effective_min_epochs(const TrainerOptions& o) {
  return o.min_epochs == 0 && o.min_steps > 0 ? 1 : o.min_epochs;
}

/// Whether a requested stop may take effect now: the epochs completed (the current epoch's
/// index while it runs) and the optimizer steps taken meet both minimums.
inline bool can_stop_early(const LoopContext& ctx) {
  return ctx.state.current_epoch >= effective_min_epochs(ctx.options) && ctx.state.global_step >= ctx.options.min_steps;
}

}  // namespace volt::loops::detail
