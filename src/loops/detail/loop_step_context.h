#pragma once
#include "volt/loops/loop.h"

namespace volt::loops::detail {

/// The StepContext steps and hooks receive: logging goes to the logger connector,
/// manual optimization to the strategy through the same routine automatic optimization uses.
class LoopStepContext final : public StepContext {
 public:
  LoopStepContext(LoopContext& ctx, RunningStage stage) : ctx_(ctx), stage_(stage) {}
  /// Installs this context as the module's log target for its lifetime.
  void attach() { ctx_.module.set_log_context(this); }
  void detach() { ctx_.module.set_log_context(nullptr); }
  /// Inside on_train_epoch_start/end: ctx.log defaults to on_step=false, on_epoch=true
  /// there (Lightning's defaults for epoch hooks).
  void set_in_epoch_hook(bool in_hook) { in_epoch_hook_ = in_hook; }
  void set_batch(int64_t batch_idx, int64_t batch_size) {
    batch_idx_ = batch_idx;
    batch_size_ = batch_size;
  }

  void log(const std::string& name, const at::Tensor& value, const LogOptions& options) override;
  using StepContext::log;
  RunningStage stage() const override { return stage_; }
  int64_t batch_idx() const override { return batch_idx_; }
  int64_t current_epoch() const override { return ctx_.state.current_epoch; }
  int64_t global_step() const override { return ctx_.state.global_step; }
  bool is_global_zero() const override { return ctx_.strategy.is_global_zero(); }
  int64_t world_size() const override { return ctx_.strategy.world_size(); }
  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const override {
    return ctx_.optimizers;
  }
  const std::vector<LRSchedulerConfig>& lr_schedulers() const override { return ctx_.lr_schedulers; }
  void manual_backward(const at::Tensor& loss) override;
  void optimizer_step(size_t i) override;
  void optimizer_zero_grad(size_t i) override;

 private:
  LoopContext& ctx_;
  RunningStage stage_;
  int64_t batch_idx_ = 0;
  int64_t batch_size_ = 1;
  bool in_epoch_hook_ = false;
};

/// RAII: attaches a context to the module and detaches it on scope exit.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(LoopStepContext& ctx) : ctx_(ctx) { ctx_.attach(); }
  ~ScopedLogContext() { ctx_.detach(); }
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  LoopStepContext& ctx_;
};

/// size(0) of the batch's first tensor (1 for scalars or empty batches).
int64_t batch_size_of(const Batch& batch);

/// Hooks around strategy.backward (on_before_backward, on_after_backward).
void run_backward(LoopContext& ctx, const at::Tensor& loss);
/// Unscale, on_before_optimizer_step hooks, clipping, the step itself, zero_grad hooks and
/// zeroing, global_step + 1. Returns false when the precision plug-in skipped the step.
bool run_optimizer_step(LoopContext& ctx, size_t index);
/// on_before_zero_grad hooks, then gradients set to none.
void run_zero_grad(LoopContext& ctx, size_t index);

}  // namespace volt::loops::detail
