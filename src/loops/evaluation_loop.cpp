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
  if (testing) {
    ctx_.callbacks.call([&](CB& cb) { cb.on_test_start(view); });
    module.on_test_start();
  } else {
    ctx_.callbacks.call([&](CB& cb) { cb.on_validation_start(view); });
    module.on_validation_start();
  }
  // A validate or test call counts its own batches for step-level rows; the validations
  // of a fit continue one count (the fit loop restarts it).
  if (state.fn != TrainerFn::kFitting && !sanity) ctx_.logger.reset_eval_step_count(stage_);
  ctx_.logger.begin_epoch(stage_);
  if (testing) {
    ctx_.callbacks.call([&](CB& cb) { cb.on_test_epoch_start(view); });
    module.on_test_epoch_start();
  } else {
    ctx_.callbacks.call([&](CB& cb) { cb.on_validation_epoch_start(view); });
    module.on_validation_epoch_start();
  }

  const int64_t previous_batch_idx = state.batch_idx;
  loader.set_epoch(0);  // evaluation order does not change between runs
  auto stream = loader.stream();
  for (int64_t i = 0; i < max_batches; ++i) {
    auto batch = stream->next();
    if (!batch) break;
    ctx_.strategy.batch_to_device(*batch);
    state.batch_idx = i;
    step_ctx.set_batch(i, detail::batch_size_of(*batch));
    if (testing) {
      ctx_.callbacks.call([&](CB& cb) { cb.on_test_batch_start(view, *batch, i); });
      module.on_test_batch_start(*batch, i);
      ctx_.strategy.test_step(module, *batch, step_ctx);
      module.on_test_batch_end(*batch, i);
      ctx_.callbacks.call([&](CB& cb) { cb.on_test_batch_end(view, *batch, i); });
      ctx_.logger.end_eval_batch(stage_);
    } else {
      ctx_.callbacks.call([&](CB& cb) { cb.on_validation_batch_start(view, *batch, i); });
      module.on_validation_batch_start(*batch, i);
      ctx_.strategy.validation_step(module, *batch, step_ctx);
      module.on_validation_batch_end(*batch, i);
      ctx_.callbacks.call([&](CB& cb) { cb.on_validation_batch_end(view, *batch, i); });
      ctx_.logger.end_eval_batch(stage_);
    }
  }
  stream.reset();
  state.batch_idx = previous_batch_idx;

  // The module's epoch-end hook may still log (e.g. an accuracy over the whole epoch).
  if (testing) {
    module.on_test_epoch_end();
  } else {
    module.on_validation_epoch_end();
  }
  // Lightning logs evaluation aggregates at the fit's batches_that_stepped (after a fit, its
  // final value; 0 on a Trainer that never fitted).
  MetricMap metrics = ctx_.logger.end_epoch(stage_, state.batches_that_stepped, state.current_epoch);
  if (testing) {
    ctx_.callbacks.call([&](CB& cb) { cb.on_test_epoch_end(view); });
    ctx_.callbacks.call([&](CB& cb) { cb.on_test_end(view); });
    module.on_test_end();
  } else {
    ctx_.callbacks.call([&](CB& cb) { cb.on_validation_epoch_end(view); });
    ctx_.callbacks.call([&](CB& cb) { cb.on_validation_end(view); });
    module.on_validation_end();
  }
  if (was_training) module.train();
  state.stage = previous_stage;
  state.sanity_checking = false;
  return metrics;
}

}  // namespace volt::loops
