#include "volt/loops/fit_loop.h"

#include <iostream>

#include "loops/detail/stop_rules.h"
#include "volt/callbacks/timer.h"
#include "volt/connectors/callback_connector.h"
#include "volt/core/error.h"
#include "volt/loops/evaluation_loop.h"

namespace volt::loops {

int64_t FitLoop::max_epochs() const {
  const auto& o = ctx_.options;
  if (o.max_epochs >= 0) return o.max_epochs;
  // Lightning: 1000 epochs unless max_steps or a Timer (max_time) bounds the run.
  if (o.max_steps >= 0) return -1;
  for (const auto& cb : ctx_.callbacks.callbacks()) {
    if (dynamic_cast<const callbacks::Timer*>(cb.get()) != nullptr) return -1;
  }
  return 1000;
}

bool FitLoop::min_reached() const {
  return detail::can_stop_early(ctx_);
}

bool FitLoop::done() const {
  const auto& o = ctx_.options;
  const auto& state = ctx_.state;
  if (state.interrupted_by != 0) return true;
  if (o.max_steps >= 0 && state.global_step >= o.max_steps) return true;
  const int64_t epochs = max_epochs();
  if (epochs >= 0 && state.current_epoch >= epochs) return true;
  return state.should_stop && min_reached();
}

void FitLoop::run_sanity_check() {
  auto val = ctx_.data.val_loader();
  const int64_t steps = ctx_.options.num_sanity_val_steps;
  if (!val || steps == 0 || ctx_.state.num_val_batches == 0) return;
  const int64_t n = steps < 0 ? ctx_.state.num_val_batches : std::min(steps, ctx_.state.num_val_batches);
  using CB = callbacks::Callback;
  ctx_.hooks.callbacks(Hook::on_sanity_check_start, [&](CB& cb) { cb.on_sanity_check_start(ctx_.view); });
  EvaluationLoop eval(ctx_, RunningStage::kSanityChecking);
  eval.run(*val, n);
  ctx_.hooks.callbacks(Hook::on_sanity_check_end, [&](CB& cb) { cb.on_sanity_check_end(ctx_.view); });
  // Sanity metrics come from an untrained model on a few batches: nobody should act on them.
  ctx_.logger.reset_metrics();
}

void FitLoop::run() {
  auto& state = ctx_.state;
  auto& view = ctx_.view;
  using CB = callbacks::Callback;
  state.max_epochs = max_epochs();
  state.max_steps = ctx_.options.max_steps;
  state.accumulate_grad_batches = ctx_.options.accumulate_grad_batches;
  state.should_stop = false;
  state.log_every_n_steps = ctx_.options.log_every_n_steps;
  state.val_check_interval = ctx_.options.val_check_interval;
  state.check_val_every_n_epoch = ctx_.options.check_val_every_n_epoch;
  state.fast_dev_run = ctx_.options.fast_dev_run > 0;
  if (ctx_.logger.has_loggers() && !state.fast_dev_run && state.is_global_zero &&
      state.num_training_batches < ctx_.options.log_every_n_steps) {
    std::cerr << "[volt] warning: the " << state.num_training_batches
              << " training batches of an epoch are fewer than log_every_n_steps=" << ctx_.options.log_every_n_steps
              << ", so steps are logged less often than once per epoch. Set a lower log_every_n_steps to see "
                 "training values during the epoch.\n";
  }
  // Lightning's _batches_that_stepped, from what a checkpoint holds: in automatic
  // optimization every step-ending batch is an optimizer step, in manual every batch counts.
  state.batches_that_stepped = ctx_.module.automatic_optimization() ? state.global_step : state.batches_seen;
  ctx_.logger.reset_eval_step_count(RunningStage::kValidating);
  epoch_loop_.begin_fit();

  // Lightning runs the sanity check before it finds there is nothing to train (max_epochs=0,
  // max_steps=0), but not when resuming from a checkpoint.
  const bool restarting = state.restarting;
  state.restarting = false;
  if (!restarting) run_sanity_check();
  // A restored or continued run may already be complete.
  if (done()) return;

  const Hooks& hooks = ctx_.hooks;
  hooks.callbacks(Hook::on_train_start, [&](CB& cb) { cb.on_train_start(view); });
  hooks.module(Hook::on_train_start, [&] { ctx_.module.on_train_start(); });
  while (!done()) {
    hooks.action(Action::run_training_epoch, [&] { epoch_loop_.run(); });
    if (state.interrupted_by != 0) break;  // mid-epoch: the checkpoint says where to go on
    // An epoch that ran to its end (or was cut short by a stop) is complete.
    state.current_epoch += 1;
    state.batches_done = 0;
    // A stop request held back by min_epochs/min_steps stands (as in Lightning): done()
    // ends the fit once the minimums are met.
    if (state.should_stop && !min_reached()) epoch_loop_.announce_held_stop();
  }
  state.stage = RunningStage::kNone;
  hooks.callbacks(Hook::on_train_end, [&](CB& cb) { cb.on_train_end(view); });
  hooks.module(Hook::on_train_end, [&] { ctx_.module.on_train_end(); });
}

}  // namespace volt::loops
