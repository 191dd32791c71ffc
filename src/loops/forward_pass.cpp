#include "volt/loops/forward_pass.h"

#include <ATen/core/grad_mode.h>

#include "volt/core/error.h"

namespace volt::loops {
namespace {

/// What training_step sees during the pass: where it is, and nothing it can change.
class ForwardOnlyStepContext final : public StepContext {
 public:
  explicit ForwardOnlyStepContext(LoopContext& ctx) : ctx_(ctx) {}
  void set_batch(int64_t batch_idx) { batch_idx_ = batch_idx; }

  // A pass that learns nothing records nothing: its values would mix into the epoch's.
  void log(const std::string&, const at::Tensor&, const LogOptions&) override {}
  using StepContext::log;
  RunningStage stage() const override { return RunningStage::kTraining; }
  int64_t batch_idx() const override { return batch_idx_; }
  int64_t current_epoch() const override { return ctx_.state.current_epoch; }
  int64_t global_step() const override { return ctx_.state.global_step; }
  bool is_global_zero() const override { return ctx_.strategy.is_global_zero(); }
  int64_t world_size() const override { return ctx_.strategy.world_size(); }
  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers() const override { return ctx_.optimizers; }
  const std::vector<LRSchedulerConfig>& lr_schedulers() const override { return ctx_.lr_schedulers; }
  void manual_backward(const at::Tensor&) override {}
  void optimizer_step(size_t) override {}
  void optimizer_zero_grad(size_t) override {}

 private:
  LoopContext& ctx_;
  int64_t batch_idx_ = 0;
};

}  // namespace

int64_t ForwardPass::run() {
  auto loader = ctx_.data.train_loader();
  if (!loader) throw Error("forward_training_data: this fit has no training loader to run.");
  Module& module = ctx_.module;
  const bool was_training = module.is_training();
  at::NoGradGuard no_grad;
  module.train();
  ForwardOnlyStepContext step_ctx(ctx_);
  int64_t ran = 0;
  loader->set_epoch(ctx_.state.current_epoch);
  auto stream = loader->stream(0);
  for (int64_t i = 0; i < ctx_.state.num_training_batches; ++i) {
    auto next = stream->next();
    if (!next) break;
    Batch& batch = *next;
    ctx_.strategy.batch_to_device(batch);
    step_ctx.set_batch(i);
    ctx_.strategy.training_step(module, batch, step_ctx);
    ++ran;
  }
  stream.reset();
  module.train(was_training);
  return ran;
}

}  // namespace volt::loops
