#include "volt/loops/evaluation_loop.h"

#include <ATen/core/grad_mode.h>

#include "loops/detail/loop_step_context.h"

namespace volt::loops {

MetricMap EvaluationLoop::run(data::DataLoader& loader, int64_t max_batches) {
  auto& module = ctx_.module;
  auto& state = ctx_.state;
  auto& view = ctx_.view;
  const bool testing = stage_ == RunningStage::kTesting;
  const bool sanity = stage_ == RunningStage::kSanityChecking;
  const RunningStage previous_stage = state.stage;
  const bool was_training = module.is_training();
  state.stage = stage_;
  state.num_eval_batches = max_batches;
  state.sanity_checking = sanity;

  detail::LoopStepContext step_ctx(ctx_, stage_);
  detail::ScopedLogContext attach(step_ctx);
  at::NoGradGuard no_grad;
  module.eval();

  using CB = callbacks::Callback;
  const Hooks& hooks = ctx_.hooks;
  // The whole pass is one action (its hooks nest inside it).
  auto run_guard =
      hooks.scoped(testing ? Action::run_test : (sanity ? Action::run_sanity_check : Action::run_validation));
  if (testing) {
    hooks.callbacks(Hook::on_test_start, [&](CB& cb) { cb.on_test_start(view); });
    hooks.module(Hook::on_test_start, [&] { module.on_test_start(); });
  } else {
    hooks.callbacks(Hook::on_validation_start, [&](CB& cb) { cb.on_validation_start(view); });
    hooks.module(Hook::on_validation_start, [&] { module.on_validation_start(); });
  }
  // A validate or test call counts its own batches for step-level rows; the validations
  // of a fit continue one count (the fit loop restarts it).
  if (state.fn != TrainerFn::kFitting && !sanity) ctx_.logger.reset_eval_step_count(stage_);
  ctx_.logger.begin_epoch(stage_);
  if (testing) {
    hooks.callbacks(Hook::on_test_epoch_start, [&](CB& cb) { cb.on_test_epoch_start(view); });
    hooks.module(Hook::on_test_epoch_start, [&] { module.on_test_epoch_start(); });
  } else {
    hooks.callbacks(Hook::on_validation_epoch_start, [&](CB& cb) { cb.on_validation_epoch_start(view); });
    hooks.module(Hook::on_validation_epoch_start, [&] { module.on_validation_epoch_start(); });
  }
  // Outside fit every batch is a step of the profiler's schedule; in fit only training batches are.
  const bool counts_steps = state.fn != TrainerFn::kFitting;

  const int64_t previous_batch_idx = state.batch_idx;
  // Validation in a fit reads with the fit's epoch (as Lightning sets its samplers' epoch): a data
  // set shared with the train loader (two Subsets of one ImageFolder) then keeps the epoch the
  // training workers draw their augmentations with. Outside a fit: epoch 0, the same every run.
  loader.set_epoch(state.fn == TrainerFn::kFitting ? state.current_epoch : 0);
  auto stream = loader.stream();
  // A stream under ddp: the pass ends when any rank's stream ends (see TrainingEpochLoop).
  const bool vote = !loader.has_length() && state.world_size > 1;
  for (int64_t i = 0; i < max_batches; ++i) {
    auto batch = hooks.action(testing ? Action::test_next : Action::val_next, [&] { return stream->next(); });
    if (vote && !ctx_.strategy.reduce_boolean_decision(batch.has_value(), /*all=*/true)) break;
    if (!batch) break;
    hooks.action(Action::batch_to_device, [&] { ctx_.strategy.batch_to_device(*batch); });
    state.batch_idx = i;
    step_ctx.set_batch(i, detail::batch_size_of(*batch));
    if (testing) {
      hooks.callbacks(Hook::on_test_batch_start, [&](CB& cb) { cb.on_test_batch_start(view, *batch, i); });
      hooks.module(Hook::on_test_batch_start, [&] { module.on_test_batch_start(*batch, i); });
      hooks.action(Action::test_step, [&] { ctx_.strategy.test_step(module, *batch, step_ctx); });
      hooks.module(Hook::on_test_batch_end, [&] { module.on_test_batch_end(*batch, i); });
      hooks.callbacks(Hook::on_test_batch_end, [&](CB& cb) { cb.on_test_batch_end(view, *batch, i); });
      ctx_.logger.end_eval_batch(stage_);
    } else {
      hooks.callbacks(Hook::on_validation_batch_start, [&](CB& cb) { cb.on_validation_batch_start(view, *batch, i); });
      hooks.module(Hook::on_validation_batch_start, [&] { module.on_validation_batch_start(*batch, i); });
      hooks.action(Action::validation_step, [&] { ctx_.strategy.validation_step(module, *batch, step_ctx); });
      hooks.module(Hook::on_validation_batch_end, [&] { module.on_validation_batch_end(*batch, i); });
      hooks.callbacks(Hook::on_validation_batch_end, [&](CB& cb) { cb.on_validation_batch_end(view, *batch, i); });
      ctx_.logger.end_eval_batch(stage_);
    }
    if (counts_steps) hooks.step();
  }
  stream.reset();
  state.batch_idx = previous_batch_idx;

  // The module's epoch-end hook may still log (e.g. an accuracy over the whole epoch).
  if (testing) {
    hooks.module(Hook::on_test_epoch_end, [&] { module.on_test_epoch_end(); });
  } else {
    hooks.module(Hook::on_validation_epoch_end, [&] { module.on_validation_epoch_end(); });
  }
  // Lightning logs evaluation aggregates at the fit's batches_that_stepped (after a fit, its
  // final value; 0 on a Trainer that never fitted).
  MetricMap metrics = ctx_.logger.end_epoch(stage_, state.batches_that_stepped, state.current_epoch);
  if (testing) {
    hooks.callbacks(Hook::on_test_epoch_end, [&](CB& cb) { cb.on_test_epoch_end(view); });
    hooks.callbacks(Hook::on_test_end, [&](CB& cb) { cb.on_test_end(view); });
    hooks.module(Hook::on_test_end, [&] { module.on_test_end(); });
  } else {
    hooks.callbacks(Hook::on_validation_epoch_end, [&](CB& cb) { cb.on_validation_epoch_end(view); });
    hooks.callbacks(Hook::on_validation_end, [&](CB& cb) { cb.on_validation_end(view); });
    hooks.module(Hook::on_validation_end, [&] { module.on_validation_end(); });
  }
  if (was_training) module.train();
  state.stage = previous_stage;
  state.sanity_checking = false;
  return metrics;
}

}  // namespace volt::loops
