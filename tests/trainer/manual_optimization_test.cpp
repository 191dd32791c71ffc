// Manual optimization (Module::set_automatic_optimization(false)): a GAN-like module with
// two sub-nets and two optimizers, stepped from training_step through the StepContext, and
// the errors that keep automatic and manual optimization apart.
#include <gtest/gtest.h>

#include "support/expect.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::Batch;
using volt::ConfigError;
using volt::StepContext;
using volt::Trainer;
using volt::testing::quiet_options;
using volt::testing::random_dataset;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

using volt::testing::contains;

/// Two Linear(32, 2) nets, "generator" g (SGD lr 0.1) and "discriminator" d (SGD lr 0.05),
/// each trained on its own cross-entropy loss with its own optimizer.
class TwoOptimizerModule : public volt::Module {
 public:
  explicit TwoOptimizerModule(bool manual = true) {
    g = register_module("g", torch::nn::Linear(32, 2));
    d = register_module("d", torch::nn::Linear(32, 2));
    set_automatic_optimization(!manual);
  }
  torch::nn::Linear g{nullptr};
  torch::nn::Linear d{nullptr};
  int64_t train_steps = 0;
  std::vector<size_t> optimizer_step_order;  // from on_before_optimizer_step
  std::vector<int64_t> global_steps_seen;
  std::shared_ptr<volt::LRScheduler> scheduler;  // optional, epoch interval

  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    ++train_steps;
    global_steps_seen.push_back(ctx.global_step());
    EXPECT_EQ(ctx.optimizers().size(), 2u);
    ctx.optimizer_zero_grad(0);
    auto loss_g = torch::nn::functional::cross_entropy(g->forward(batch[0]), batch[1]);
    ctx.manual_backward(loss_g);
    ctx.optimizer_step(0);

    ctx.optimizer_zero_grad(1);
    auto loss_d = torch::nn::functional::cross_entropy(d->forward(batch[0]), batch[1]);
    ctx.manual_backward(loss_d);
    ctx.optimizer_step(1);
    ctx.log("loss_g", loss_g);
    ctx.log("loss_d", loss_d);
    return at::Tensor();
  }
  volt::OptimizerConfig configure_optimizers() override {
    volt::OptimizerConfig config;
    config.optimizers.push_back(std::make_shared<torch::optim::SGD>(g->parameters(), torch::optim::SGDOptions(0.1)));
    config.optimizers.push_back(std::make_shared<torch::optim::SGD>(d->parameters(), torch::optim::SGDOptions(0.05)));
    if (with_scheduler) {
      scheduler = std::make_shared<volt::StepLR>(*config.optimizers[0], 1, 0.5);
      volt::LRSchedulerConfig cfg;
      cfg.scheduler = scheduler;
      config.lr_schedulers.push_back(cfg);
    }
    return config;
  }
  void on_before_optimizer_step(torch::optim::Optimizer&, size_t index) override {
    optimizer_step_order.push_back(index);
  }
  bool with_scheduler = false;
};

/// One net trained by hand as TwoOptimizerModule trains each of its nets.
at::Tensor hand_trained(const torch::nn::Linear& start, double lr, int64_t n, int64_t batch, uint64_t seed,
                        int64_t epochs) {
  torch::nn::Linear ref(32, 2);
  {
    at::NoGradGuard no_grad;
    ref->weight.copy_(start->weight);
    ref->bias.copy_(start->bias);
  }
  torch::optim::SGD opt(ref->parameters(), torch::optim::SGDOptions(lr));
  auto ds = random_dataset(n, seed);
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t i = 0; i < n; i += batch) {
      opt.zero_grad();
      auto x = ds->tensors()[0].slice(0, i, std::min(n, i + batch));
      auto y = ds->tensors()[1].slice(0, i, std::min(n, i + batch));
      torch::nn::functional::cross_entropy(ref->forward(x), y).backward();
      opt.step();
    }
  }
  return ref->weight.detach().clone();
}

TEST(ManualOptimization, TwoOptimizersBothStepAndEachCountsAGlobalStep) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  Trainer trainer(o);
  TwoOptimizerModule m;
  torch::nn::Linear g0(32, 2);
  torch::nn::Linear d0(32, 2);
  {
    at::NoGradGuard no_grad;
    g0->weight.copy_(m.g->weight);
    g0->bias.copy_(m.g->bias);
    d0->weight.copy_(m.d->weight);
    d0->bias.copy_(m.d->bias);
  }
  trainer.fit(m, random_loader(16, 4, 31));  // 4 batches an epoch
  EXPECT_EQ(m.train_steps, 8);
  EXPECT_EQ(trainer.global_step(), 16);  // Lightning: every optimizer.step() counts
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_EQ(m.global_steps_seen, (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  ASSERT_EQ(m.optimizer_step_order.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(m.optimizer_step_order[i], i % 2) << i;
  EXPECT_FALSE(at::equal(m.g->weight, g0->weight));
  EXPECT_FALSE(at::equal(m.d->weight, d0->weight));
  EXPECT_TRUE(at::allclose(m.g->weight, hand_trained(g0, 0.1, 16, 4, 31, 2), 0.0, 1e-6));
  EXPECT_TRUE(at::allclose(m.d->weight, hand_trained(d0, 0.05, 16, 4, 31, 2), 0.0, 1e-6));
  EXPECT_EQ(trainer.callback_metrics().count("loss_g"), 1u);
  EXPECT_EQ(trainer.callback_metrics().count("loss_d"), 1u);
}

TEST(ManualOptimization, MaxStepsCountsEveryOptimizerStep) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 5;
  o.max_steps = 6;
  Trainer trainer(o);
  TwoOptimizerModule m;
  trainer.fit(m, random_loader(32, 4, 31));
  EXPECT_EQ(trainer.global_step(), 6);
  EXPECT_EQ(m.train_steps, 3);
}

TEST(ManualOptimization, SchedulersAreNotSteppedForTheUser) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  Trainer trainer(o);
  TwoOptimizerModule m;
  m.with_scheduler = true;
  trainer.fit(m, random_loader(8, 4, 31));
  ASSERT_TRUE(m.scheduler);
  EXPECT_EQ(m.scheduler->last_epoch(), 0);  // Lightning: manual optimization steps its own schedulers
  EXPECT_EQ(trainer.global_step(), 12);
}

TEST(ManualOptimization, AutomaticOptimizationWithTwoOptimizersIsAConfigErrorAtFit) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  TwoOptimizerModule m(/*manual=*/false);
  try {
    trainer.fit(m, random_loader(8, 4, 31));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "2 optimizers")) << e.what();
    EXPECT_TRUE(contains(e.what(), "set_automatic_optimization(false)")) << e.what();
  }
  EXPECT_EQ(m.train_steps, 0);
}

/// Automatic optimization, but training_step calls manual_backward.
class WrongBackwardModule : public volt::testing::BoringModule {
 public:
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    auto loss = loss_of(batch);
    ctx.manual_backward(loss);
    return loss;
  }
};

TEST(ManualOptimization, ManualBackwardWithAutomaticOptimizationThrows) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  WrongBackwardModule m;
  try {
    trainer.fit(m, random_loader(8, 4, 31));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "manual_backward")) << e.what();
    EXPECT_TRUE(contains(e.what(), "automatic optimization")) << e.what();
  }
  EXPECT_EQ(trainer.global_step(), 0);
}

/// Manual optimization that steps an optimizer that does not exist.
class OutOfRangeModule : public TwoOptimizerModule {
 public:
  at::Tensor training_step(Batch&, StepContext& ctx) override {
    ctx.optimizer_step(2);
    return at::Tensor();
  }
};

TEST(ManualOptimization, OptimizerIndexOutOfRangeIsAConfigError) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  OutOfRangeModule m;
  try {
    trainer.fit(m, random_loader(8, 4, 31));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "optimizer_step(2)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "2 optimizer")) << e.what();
  }
}

// Lightning rejects accumulate_grad_batches != 1 with manual optimization at fit start
// ("Automatic gradient accumulation is not supported for manual optimization. Remove
// Trainer(accumulate_grad_batches=...)"); so does Volt, instead of silently dropping the flag.
TEST(ManualOptimization, AccumulateGradBatchesIsAConfigErrorAtFit) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  TwoOptimizerModule m;
  try {
    trainer.fit(m, random_loader(8, 4, 31));
    ADD_FAILURE() << "no ConfigError: accumulate_grad_batches=2 was silently ignored (global_step "
                  << trainer.global_step() << ")";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "accumulate_grad_batches=2")) << e.what();
  }
  EXPECT_EQ(m.train_steps, 0);
}

/// One Linear(2, 1) at zero; loss = sum(w . x) with x = (3, 4): gradient norm 5.
class ManualClipModule : public volt::Module {
 public:
  ManualClipModule() {
    layer = register_module("layer", torch::nn::Linear(torch::nn::LinearOptions(2, 1).bias(false)));
    at::NoGradGuard no_grad;
    layer->weight.zero_();
    set_automatic_optimization(false);
  }
  torch::nn::Linear layer{nullptr};
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    ctx.optimizer_zero_grad(0);
    ctx.manual_backward(layer->forward(batch[0]).sum());
    ctx.optimizer_step(0);
    return at::Tensor();
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(1.0));
  }
};

// Volt documents (StepContext::optimizer_step) that Trainer-level clipping applies to
// manual steps; Lightning instead refuses gradient_clip_val with manual optimization.
TEST(ManualOptimization, TrainerGradientClippingAppliesToManualSteps) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.gradient_clip_val = 1.0;
  Trainer trainer(o);
  ManualClipModule m;
  auto x = at::tensor({3.0f, 4.0f}).reshape({1, 2});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 1;
  trainer.fit(m, std::make_shared<volt::data::DataLoader>(
                     std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x}), lo));
  EXPECT_TRUE(at::allclose(m.layer->weight.reshape({2}), at::tensor({-0.6f, -0.8f}), 0.0, 1e-5)) << m.layer->weight;
}

}  // namespace
