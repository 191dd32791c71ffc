// LearningRateMonitor against Lightning 2.2.5's LearningRateMonitor (keys, when rows are
// written, at which step): the expected rows were read from Lightning runs of the same
// configurations.
#include "volt/callbacks/lr_monitor.h"

#include <memory>
#include <string>
#include <vector>

#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include "support/fake_trainer_view.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"

namespace {

using volt::Interval;
using volt::MetricMap;
using volt::callbacks::LearningRateMonitor;

at::Tensor param() { return at::zeros({2}).requires_grad_(); }

std::shared_ptr<torch::optim::SGD> make_sgd(double lr, double momentum = 0.0) {
  return std::make_shared<torch::optim::SGD>(std::vector<at::Tensor>{param()},
                                             torch::optim::SGDOptions(lr).momentum(momentum));
}

std::shared_ptr<torch::optim::Adam> make_adam_two_groups(double lr0, double lr1) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{param()}, std::make_unique<torch::optim::AdamOptions>(lr0));
  groups.emplace_back(std::vector<at::Tensor>{param()}, std::make_unique<torch::optim::AdamOptions>(lr1));
  return std::make_shared<torch::optim::Adam>(std::move(groups), torch::optim::AdamOptions(lr0));
}

class LearningRateMonitorTest : public ::testing::Test {
 protected:
  LearningRateMonitorTest() {
    view_.has_loggers_ = true;
    view_.state_.log_every_n_steps = 1;
  }

  // One training batch as the loop runs it: on_train_batch_start, the optimizer step (and
  // step-interval scheduler steps) unless the batch accumulates, then batches_that_stepped + 1.
  void train_batch(LearningRateMonitor& monitor, bool optimizer_steps = true) {
    monitor.on_train_batch_start(view_, {}, view_.state_.batch_idx++);
    if (!optimizer_steps) return;
    for (auto& config : view_.lr_schedulers_) {
      if (config.interval == Interval::kStep) config.scheduler->step();
    }
    ++view_.state_.global_step;
    ++view_.state_.batches_that_stepped;
  }
  void epoch(LearningRateMonitor& monitor, int batches) {
    monitor.on_train_epoch_start(view_);
    for (int b = 0; b < batches; ++b) train_batch(monitor);
    for (auto& config : view_.lr_schedulers_) {
      if (config.interval == Interval::kEpoch) config.scheduler->step();
    }
    ++view_.state_.current_epoch;
    view_.state_.batch_idx = 0;
  }
  std::vector<int64_t> steps() const {
    std::vector<int64_t> out;
    for (const auto& row : view_.logged_) out.push_back(row.second);
    return out;
  }

  volt::testing::FakeTrainerView view_;
};

TEST_F(LearningRateMonitorTest, KeysAreLrAndTheOptimizerClassName) {
  view_.optimizers_ = {make_sgd(0.1, 0.9)};
  LearningRateMonitor monitor(std::nullopt, /*log_momentum=*/true);
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr-SGD", 0.1}, {"lr-SGD-momentum", 0.9}}));
  EXPECT_EQ(LearningRateMonitor::optimizer_class_name(*make_adam_two_groups(1, 1)), "Adam");
}

TEST_F(LearningRateMonitorTest, StepSchedulerWithParamGroupsLogsEveryLogEveryNStepsAtBatchStart) {
  // Lightning, Adam with two groups (0.1, 0.05), StepLR(1, 0.5) per step, log_every_n_steps=5,
  // 10 batches: rows at steps 4 and 9 with the rates in effect when those batches start.
  auto adam = make_adam_two_groups(0.1, 0.05);
  view_.optimizers_ = {adam};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*adam, 1, 0.5), Interval::kStep, 1, ""}};
  view_.state_.log_every_n_steps = 5;
  LearningRateMonitor monitor;
  monitor.setup(view_, volt::Stage::kFit);
  epoch(monitor, 10);
  EXPECT_EQ(steps(), (std::vector<int64_t>{4, 9}));
  ASSERT_EQ(view_.logged_.size(), 2u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr-Adam/pg1", 0.00625}, {"lr-Adam/pg2", 0.003125}}));
  EXPECT_DOUBLE_EQ(view_.logged_[1].first.at("lr-Adam/pg1"), 0.1 / 512);
}

TEST_F(LearningRateMonitorTest, EpochSchedulerLogsAtEpochStartOnly) {
  // Lightning: rows at 0 and 10 for 10 batches per epoch.
  auto sgd = make_sgd(0.1);
  view_.optimizers_ = {sgd};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*sgd, 1, 0.5), Interval::kEpoch, 1, ""}};
  view_.state_.log_every_n_steps = 5;
  LearningRateMonitor monitor;
  epoch(monitor, 10);
  epoch(monitor, 10);
  EXPECT_EQ(steps(), (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(view_.logged_[1].first, (MetricMap{{"lr-SGD", 0.05}}));
}

TEST_F(LearningRateMonitorTest, OptimizerWithoutSchedulerIsLoggedAtEpochStartAndOnLoggingSteps) {
  // Lightning, no scheduler, log_every_n_steps=5, 2 epochs of 10: 0, 4, 9, 10, 14, 19.
  view_.optimizers_ = {make_sgd(0.1)};
  view_.state_.log_every_n_steps = 5;
  LearningRateMonitor monitor;
  epoch(monitor, 10);
  epoch(monitor, 10);
  EXPECT_EQ(steps(), (std::vector<int64_t>{0, 4, 9, 10, 14, 19}));

  LearningRateMonitor per_epoch(Interval::kEpoch);
  view_.logged_.clear();
  epoch(per_epoch, 10);
  EXPECT_EQ(steps(), (std::vector<int64_t>{20}));
}

TEST_F(LearningRateMonitorTest, AccumulatingBatchesLogAtTheStepOfTheirWindowLikeLightning) {
  // Lightning, accumulate_grad_batches=2, log_every_n_steps=2: both batches of the window
  // that completes step 2 start at batches_that_stepped 1, and both write a row.
  view_.optimizers_ = {make_sgd(0.1)};
  view_.state_.log_every_n_steps = 2;
  LearningRateMonitor monitor(Interval::kStep);
  for (int b = 0; b < 4; ++b) train_batch(monitor, /*optimizer_steps=*/b % 2 == 1);
  EXPECT_EQ(steps(), (std::vector<int64_t>{1, 1}));
}

TEST_F(LearningRateMonitorTest, EveryBatchIsLoggedOnceAStopIsRequested) {
  view_.optimizers_ = {make_sgd(0.1)};
  view_.state_.log_every_n_steps = 5;
  LearningRateMonitor monitor(Interval::kStep);
  train_batch(monitor);
  view_.state_.should_stop = true;
  train_batch(monitor);
  train_batch(monitor);
  EXPECT_EQ(steps(), (std::vector<int64_t>{1, 2}));
}

TEST_F(LearningRateMonitorTest, SecondOptimizerOfOneClassGetsLightningsSuffix) {
  view_.optimizers_ = {make_sgd(0.3), make_sgd(0.7)};
  LearningRateMonitor monitor;
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr-SGD", 0.3}, {"lr-SGD-1", 0.7}}));
}

TEST_F(LearningRateMonitorTest, SchedulersAreNamedFirstThenOptimizersWithoutOne) {
  auto a = make_sgd(1.0);
  auto b = make_sgd(2.0);
  auto adam = make_adam_two_groups(0.5, 0.25);
  view_.optimizers_ = {a, b, adam};
  // b has a scheduler: it is named first, a second.
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*b, 10), Interval::kStep, 1, ""}};
  LearningRateMonitor monitor;
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first,
            (MetricMap{{"lr-SGD", 2.0}, {"lr-SGD-1", 1.0}, {"lr-Adam/pg1", 0.5}, {"lr-Adam/pg2", 0.25}}));
}

TEST_F(LearningRateMonitorTest, NamedSchedulersKeepTheirNamesAndARepeatedNameStaysApart) {
  auto a = make_sgd(1.0);
  auto b = make_sgd(2.0);
  view_.optimizers_ = {a, b};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*a, 10), Interval::kStep, 1, "backbone"},
                          {std::make_shared<volt::StepLR>(*b, 10), Interval::kStep, 1, "backbone"}};
  LearningRateMonitor monitor;
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"backbone", 1.0}, {"backbone-1", 2.0}}));
}

TEST_F(LearningRateMonitorTest, MomentumIsBeta1ForAdamAndWarnedAboutWhenMissing) {
  auto sgd = make_sgd(0.1, 0.9);
  auto adam = std::make_shared<torch::optim::Adam>(
      std::vector<at::Tensor>{param()},
      torch::optim::AdamOptions(1e-3).betas(std::make_tuple(0.8, 0.999)));
  view_.optimizers_ = {sgd, adam};
  LearningRateMonitor monitor(std::nullopt, /*log_momentum=*/true);
  ::testing::internal::CaptureStderr();
  monitor.on_train_start(view_);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "both have a momentum";
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first,
            (MetricMap{{"lr-SGD", 0.1}, {"lr-SGD-momentum", 0.9}, {"lr-Adam", 1e-3}, {"lr-Adam-momentum", 0.8}}));

  view_.optimizers_ = {
      std::make_shared<torch::optim::Adagrad>(std::vector<at::Tensor>{param()}, torch::optim::AdagradOptions(0.01))};
  LearningRateMonitor adagrad(std::nullopt, /*log_momentum=*/true);
  ::testing::internal::CaptureStderr();
  adagrad.on_train_start(view_);
  adagrad.on_train_start(view_);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("logged as 0"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "once: " << err;
  view_.logged_.clear();
  train_batch(adagrad);
  EXPECT_EQ(view_.logged_.at(0).first, (MetricMap{{"lr-Adagrad", 0.01}, {"lr-Adagrad-momentum", 0.0}}));
}

TEST_F(LearningRateMonitorTest, FitWithoutLoggersIsAConfigError) {
  view_.has_loggers_ = false;
  LearningRateMonitor monitor;
  try {
    monitor.setup(view_, volt::Stage::kFit);
    FAIL() << "expected volt::ConfigError";
  } catch (const volt::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("LearningRateMonitor needs a logger; ", 0), 0u)
        << e.what();
  }
  EXPECT_NO_THROW(monitor.setup(view_, volt::Stage::kTest));
  view_.has_loggers_ = true;
  EXPECT_NO_THROW(monitor.setup(view_, volt::Stage::kFit));
  EXPECT_EQ(monitor.state_key(), "LearningRateMonitor");
}

}  // namespace
