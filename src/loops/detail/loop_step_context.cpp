#include "loops/detail/loop_step_context.h"

#include <torch/optim/optimizer.h>

#include "volt/core/error.h"

namespace volt::loops::detail {

int64_t batch_size_of(const Batch& batch) {
  if (batch.empty() || !batch.front().defined() || batch.front().dim() == 0) return 1;
  return batch.front().size(0);
}

void LoopStepContext::log(const std::string& name, const at::Tensor& value, const LogOptions& options) {
  if (in_epoch_hook_ && !options.on_step && !options.on_epoch) {
    LogOptions epoch_level = options;
    epoch_level.on_step = false;
    epoch_level.on_epoch = true;
    ctx_.logger.log(stage_, name, value, epoch_level, 1);
    return;
  }
  ctx_.logger.log(stage_, name, value, options, batch_size_);
}

void LoopStepContext::manual_backward(const at::Tensor& loss) {
  if (ctx_.module.automatic_optimization()) {
    throw ConfigError("ctx.manual_backward was called with automatic optimization on. Call "
                      "set_automatic_optimization(false) in the module's constructor, or return the loss "
                      "from training_step and let the Trainer call backward.");
  }
  run_backward(ctx_, loss);
}

void LoopStepContext::optimizer_step(size_t i) {
  if (i >= ctx_.optimizers.size()) {
    throw ConfigError("ctx.optimizer_step(" + std::to_string(i) + ") but configure_optimizers returned " +
                      std::to_string(ctx_.optimizers.size()) + " optimizer(s).");
  }
  run_optimizer_step(ctx_, i);
}

void LoopStepContext::optimizer_zero_grad(size_t i) {
  if (i >= ctx_.optimizers.size()) {
    throw ConfigError("ctx.optimizer_zero_grad(" + std::to_string(i) + ") but configure_optimizers returned " +
                      std::to_string(ctx_.optimizers.size()) + " optimizer(s).");
  }
  run_zero_grad(ctx_, i);
}

void run_backward(LoopContext& ctx, const at::Tensor& loss) {
  const Hooks& hooks = ctx.hooks;
  hooks.callbacks(Hook::on_before_backward, [&](callbacks::Callback& cb) { cb.on_before_backward(ctx.view, loss); });
  hooks.module(Hook::on_before_backward, [&] { ctx.module.on_before_backward(loss); });
  hooks.action(Action::backward, [&] { ctx.strategy.backward(loss); });
  hooks.callbacks(Hook::on_after_backward, [&](callbacks::Callback& cb) { cb.on_after_backward(ctx.view); });
  hooks.module(Hook::on_after_backward, [&] { ctx.module.on_after_backward(); });
}

bool run_optimizer_step(LoopContext& ctx, size_t index) {
  auto& optimizer = *ctx.optimizers[index];
  const Hooks& hooks = ctx.hooks;
  const bool stepped = hooks.action(Action::optimizer_step, [&] {
    return ctx.strategy.optimizer_step(optimizer, [&] {
      // Gradients are unscaled here: hooks and clipping see their true values.
      hooks.callbacks(Hook::on_before_optimizer_step,
                      [&](callbacks::Callback& cb) { cb.on_before_optimizer_step(ctx.view, optimizer, index); });
      hooks.module(Hook::on_before_optimizer_step, [&] { ctx.module.on_before_optimizer_step(optimizer, index); });
      if (ctx.options.gradient_clip_val > 0.0) {
        ctx.strategy.clip_gradients(optimizer, ctx.options.gradient_clip_val, ctx.gradient_clip_algorithm);
      }
    });
  });
  ++ctx.state.global_step;
  run_zero_grad(ctx, index);
  return stepped;
}

void run_zero_grad(LoopContext& ctx, size_t index) {
  auto& optimizer = *ctx.optimizers[index];
  const Hooks& hooks = ctx.hooks;
  hooks.callbacks(Hook::on_before_zero_grad,
                  [&](callbacks::Callback& cb) { cb.on_before_zero_grad(ctx.view, optimizer); });
  hooks.module(Hook::on_before_zero_grad, [&] { ctx.module.on_before_zero_grad(optimizer); });
  // Set to none (PyTorch 2.x's default): no memset, and the next backward writes fresh
  // gradients. Works on LibTorch 1.13, whose zero_grad() only zeroes.
  hooks.action(Action::optimizer_zero_grad, [&] {
    for (auto& group : optimizer.param_groups()) {
      for (auto& p : group.params()) {
        if (p.mutable_grad().defined()) p.mutable_grad() = at::Tensor();
      }
    }
  });
}

}  // namespace volt::loops::detail
