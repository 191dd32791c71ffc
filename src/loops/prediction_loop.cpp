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
  ctx_.callbacks.call([&](CB& cb) { cb.on_predict_start(view); });
  module.on_predict_start();
  module.on_predict_epoch_start();
  std::vector<at::Tensor> out;
  out.reserve(static_cast<size_t>(max_batches));
  loader.set_epoch(0);
  auto stream = loader.stream();
  for (int64_t i = 0; i < max_batches; ++i) {
    auto batch = stream->next();
    if (!batch) break;
    ctx_.strategy.batch_to_device(*batch);
    state.batch_idx = i;
    step_ctx.set_batch(i, detail::batch_size_of(*batch));
    ctx_.callbacks.call([&](CB& cb) { cb.on_predict_batch_start(view, *batch, i); });
    at::Tensor prediction = ctx_.strategy.predict_step(module, *batch, step_ctx);
    out.push_back(prediction.defined() ? prediction.to(at::kCPU) : prediction);
    ctx_.callbacks.call([&](CB& cb) { cb.on_predict_batch_end(view, *batch, i); });
  }
  module.on_predict_epoch_end();
  ctx_.callbacks.call([&](CB& cb) { cb.on_predict_end(view); });
  module.on_predict_end();
  if (was_training) module.train();
  state.stage = RunningStage::kNone;
  return out;
}

}  // namespace volt::loops
