#pragma once
// What the weight-averaging tests (swa_test.cpp, ema_test.cpp) share: a small classifier with
// an optional batch-norm layer and LR scheduler, initialised from a generator of its own, and
// callbacks that record weights or save a checkpoint at a given step.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tanh.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "volt/callbacks/callback.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/module.h"

namespace volt::testing {

/// Linear(8, 6) [-> BatchNorm1d(6)] -> tanh -> Linear(6, 2), cross-entropy, SGD with momentum
/// (so the optimizer has state a resume must bring back), optionally a StepLR every 2 epochs.
class AveragingNet : public Module {
 public:
  explicit AveragingNet(bool batch_norm = false, bool scheduler = false, double lr = 0.1)
      : scheduler_(scheduler), lr_(lr) {
    fc1 = register_module("fc1", torch::nn::Linear(8, 6));
    if (batch_norm) bn = register_module("bn", torch::nn::BatchNorm1d(6));
    fc2 = register_module("fc2", torch::nn::Linear(6, 2));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2024);
    at::NoGradGuard no_grad;
    for (auto& p : parameters()) p.copy_(at::randn(p.sizes(), gen) * 0.5);
  }

  /// What the batch-norm layer (if any) normalises.
  at::Tensor pre_norm(const at::Tensor& x) { return fc1->forward(x); }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = pre_norm(x);
    if (bn) h = bn->forward(h);
    return fc2->forward(at::tanh(h));
  }
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    ++train_steps;
    at::Tensor loss = torch::nn::functional::cross_entropy(forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss);
    return loss;
  }
  void validation_step(Batch& batch, StepContext& ctx) override {
    ++val_steps;
    ctx.log("val_loss", torch::nn::functional::cross_entropy(forward(batch[0]), batch[1]));
  }
  OptimizerConfig configure_optimizers() override {
    auto opt = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(lr_).momentum(0.9));
    if (!scheduler_) return opt;
    LRSchedulerConfig cfg;
    cfg.scheduler = std::make_shared<StepLR>(*opt, 2, 0.5);
    return OptimizerConfig(opt, cfg);
  }

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  int64_t train_steps = 0;
  int64_t val_steps = 0;

 private:
  bool scheduler_;
  double lr_;
};

/// Copies of every parameter, then every buffer (the weights a resume must reproduce).
inline std::vector<at::Tensor> state_tensors(const Module& m) {
  std::vector<at::Tensor> out = weights(m);
  for (const auto& b : m.buffers()) out.push_back(b.detach().clone());
  return out;
}

/// Writes a full checkpoint to `path` right after optimizer step `step` (on_train_batch_end),
/// or, with `at_epoch_end`, at the end of the epoch that step ends (on_train_epoch_end, where
/// ModelCheckpoint saves by default).
class SaveAtStep : public callbacks::Callback {
 public:
  SaveAtStep(int64_t step, std::string path, bool at_epoch_end = false)
      : step_(step), path_(std::move(path)), at_epoch_end_(at_epoch_end) {}
  std::string state_key() const override { return "SaveAtStep"; }
  void on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) override {
    if (!at_epoch_end_) save_if_due(view);
  }
  void on_train_epoch_end(TrainerView& view) override {
    if (at_epoch_end_) save_if_due(view);
  }

 private:
  void save_if_due(TrainerView& view) {
    if (view.state().global_step != step_ || saved_) return;
    saved_ = true;
    view.save_checkpoint(path_);
  }
  int64_t step_;
  std::string path_;
  bool at_epoch_end_;
  bool saved_ = false;
};

}  // namespace volt::testing
