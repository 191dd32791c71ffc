#include "volt/loops/prediction_loop.h"

#include <ATen/core/grad_mode.h>

#include "loops/detail/loop_step_context.h"

namespace volt::loops {

std::vector<at::Tensor> PredictionLoop::run(data::DataLoader& loader, int64_t max_batches) {
  auto& module = ctx_.module;
  auto& state = ctx_.state;
  auto& view = ctx_.view;
  state.stage = RunningStage::kPredicting;
  state.num_eval_batches = max_batches;
  detail::LoopStepContext step_ctx(ctx_, RunningStage::kPredicting);
  detail::ScopedLogContext attach(step_ctx);
  at::NoGradGuard no_grad;
  const bool was_training = module.is_training();
  module.eval();
  using CB = callbacks::Callback;
  const Hooks& hooks = ctx_.hooks;
  auto run_guard = hooks.scoped(Action::run_predict);
  hooks.callbacks(Hook::on_predict_start, [&](CB& cb) { cb.on_predict_start(view); });
  hooks.module(Hook::on_predict_start, [&] { module.on_predict_start(); });
  hooks.module(Hook::on_predict_epoch_start, [&] { module.on_predict_epoch_start(); });
  std::vector<at::Tensor> out;
  if (loader.has_length()) out.reserve(static_cast<size_t>(max_batches));
  loader.set_epoch(0);
  auto stream = loader.stream();
  const bool vote = !loader.has_length() && state.world_size > 1;
  for (int64_t i = 0; i < max_batches; ++i) {
    auto batch = hooks.action(Action::predict_next, [&] { return stream->next(); });
    // A stream under ddp: every rank predicts until the first rank's stream ends (as in training).
    if (vote && !ctx_.strategy.reduce_boolean_decision(batch.has_value(), /*all=*/true)) break;
    if (!batch) break;
    hooks.action(Action::batch_to_device, [&] { ctx_.strategy.batch_to_device(*batch); });
    state.batch_idx = i;
    step_ctx.set_batch(i, detail::batch_size_of(*batch));
    hooks.callbacks(Hook::on_predict_batch_start, [&](CB& cb) { cb.on_predict_batch_start(view, *batch, i); });
    at::Tensor prediction =
        hooks.action(Action::predict_step, [&] { return ctx_.strategy.predict_step(module, *batch, step_ctx); });
    out.push_back(prediction.defined() ? prediction.to(at::kCPU) : prediction);
    hooks.callbacks(Hook::on_predict_batch_end, [&](CB& cb) { cb.on_predict_batch_end(view, *batch, i); });
    hooks.step();
  }
  hooks.module(Hook::on_predict_epoch_end, [&] { module.on_predict_epoch_end(); });
  hooks.callbacks(Hook::on_predict_end, [&](CB& cb) { cb.on_predict_end(view); });
  hooks.module(Hook::on_predict_end, [&] { module.on_predict_end(); });
  if (was_training) module.train();
  state.stage = RunningStage::kNone;
  return out;
}

}  // namespace volt::loops
