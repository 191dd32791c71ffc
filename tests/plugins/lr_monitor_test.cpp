#include "volt/callbacks/lr_monitor.h"

#include <memory>
#include <string>
#include <vector>

#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
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

class LearningRateMonitorTest : public ::testing::Test {
 protected:
  LearningRateMonitorTest() { view_.has_loggers_ = true; }

  // One training batch as the loop runs it: optimizer step (+ step-interval scheduler
  // step), global_step advances, then on_train_batch_end.
  void train_batch(LearningRateMonitor& monitor, bool optimizer_steps = true) {
    if (optimizer_steps) {
      for (auto& config : view_.lr_schedulers_) {
        if (config.interval == Interval::kStep) config.scheduler->step();
      }
      ++view_.state_.global_step;
    }
    monitor.on_train_batch_end(view_, at::Tensor(), {}, view_.state_.batch_idx++);
  }
  void epoch_end() {
    for (auto& config : view_.lr_schedulers_) {
      if (config.interval == Interval::kEpoch) config.scheduler->step();
    }
    ++view_.state_.current_epoch;
    view_.state_.batch_idx = 0;
  }

  volt::testing::FakeTrainerView view_;
};

TEST_F(LearningRateMonitorTest, LogsStepSchedulerRateAfterEveryOptimizerStep) {
  auto sgd = make_sgd(1.0);
  view_.optimizers_ = {sgd};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*sgd, 2, 0.1), Interval::kStep, 1, ""}};
  LearningRateMonitor monitor;
  monitor.setup(view_, volt::Stage::kFit);
  monitor.on_train_epoch_start(view_);
  EXPECT_TRUE(view_.logged_.empty()) << "no epoch-interval scheduler to log";
  for (int i = 0; i < 4; ++i) train_batch(monitor);

  ASSERT_EQ(view_.logged_.size(), 4u);
  const std::vector<double> expected = {1.0, 0.1, 0.1, 0.01};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(view_.logged_[i].second, static_cast<int64_t>(i + 1));
    ASSERT_EQ(view_.logged_[i].first.size(), 1u);
    EXPECT_DOUBLE_EQ(view_.logged_[i].first.at("lr-opt0"), expected[i]) << "step " << i + 1;
  }
}

TEST_F(LearningRateMonitorTest, LogsEpochSchedulerRateAtEpochStartOnly) {
  auto sgd = make_sgd(1.0);
  view_.optimizers_ = {sgd};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*sgd, 1, 0.5), Interval::kEpoch, 1, ""}};
  LearningRateMonitor monitor;
  for (int epoch = 0; epoch < 3; ++epoch) {
    monitor.on_train_epoch_start(view_);
    for (int b = 0; b < 2; ++b) train_batch(monitor);
    epoch_end();
  }
  ASSERT_EQ(view_.logged_.size(), 3u);
  const std::vector<double> expected = {1.0, 0.5, 0.25};
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(view_.logged_[e].second, static_cast<int64_t>(2 * e)) << "logged at global_step";
    EXPECT_DOUBLE_EQ(view_.logged_[e].first.at("lr-opt0"), expected[e]);
  }
}

TEST_F(LearningRateMonitorTest, LoggingIntervalOverridesSchedulerInterval) {
  auto sgd = make_sgd(1.0);
  view_.optimizers_ = {sgd};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*sgd, 1, 0.5), Interval::kEpoch, 1, ""}};
  LearningRateMonitor every_step(Interval::kStep);
  every_step.on_train_epoch_start(view_);
  train_batch(every_step);
  train_batch(every_step);
  ASSERT_EQ(view_.logged_.size(), 2u);
  EXPECT_EQ(view_.logged_[1].second, 2);
  EXPECT_DOUBLE_EQ(view_.logged_[1].first.at("lr-opt0"), 1.0);
}

TEST_F(LearningRateMonitorTest, NamedSchedulerWithParamGroupsLogsOneKeyPerGroup) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{param()},
                      std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(std::vector<at::Tensor>{param()},
                      std::make_unique<torch::optim::SGDOptions>(0.01));
  auto sgd = std::make_shared<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(1.0));
  view_.optimizers_ = {sgd};
  view_.lr_schedulers_ = {
      {std::make_shared<volt::StepLR>(*sgd, 1, 0.5), Interval::kStep, 1, "backbone"}};
  LearningRateMonitor monitor;
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  const MetricMap& m = view_.logged_[0].first;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at("backbone/pg1"), 0.05);
  EXPECT_DOUBLE_EQ(m.at("backbone/pg2"), 0.005);
}

TEST_F(LearningRateMonitorTest, RepeatedNamesGetNumberedSuffixes) {
  auto a = make_sgd(1.0);
  auto b = make_sgd(2.0);
  view_.optimizers_ = {a, b};
  view_.lr_schedulers_ = {{std::make_shared<volt::StepLR>(*a, 10), Interval::kStep, 1, "lr"},
                          {std::make_shared<volt::StepLR>(*b, 10), Interval::kStep, 1, "lr"}};
  LearningRateMonitor monitor;
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr", 1.0}, {"lr-1", 2.0}}));
}

TEST_F(LearningRateMonitorTest, WithoutSchedulersLogsOptimizerRates) {
  view_.optimizers_ = {make_sgd(0.3), make_sgd(0.7)};
  LearningRateMonitor monitor;
  monitor.on_train_epoch_start(view_);
  EXPECT_TRUE(view_.logged_.empty());
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr-opt0", 0.3}, {"lr-opt1", 0.7}}));
  EXPECT_EQ(view_.logged_[0].second, 1);

  LearningRateMonitor per_epoch(Interval::kEpoch);
  view_.logged_.clear();
  train_batch(per_epoch);
  EXPECT_TRUE(view_.logged_.empty());
  per_epoch.on_train_epoch_start(view_);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first.size(), 2u);
}

TEST_F(LearningRateMonitorTest, AccumulatingBatchesLogOncePerOptimizerStep) {
  view_.optimizers_ = {make_sgd(0.1)};
  LearningRateMonitor monitor;
  train_batch(monitor, /*optimizer_steps=*/false);  // global_step 0
  train_batch(monitor, /*optimizer_steps=*/true);   // 1
  train_batch(monitor, /*optimizer_steps=*/false);  // still 1
  train_batch(monitor, /*optimizer_steps=*/true);   // 2
  ASSERT_EQ(view_.logged_.size(), 3u);
  EXPECT_EQ(view_.logged_[0].second, 0);
  EXPECT_EQ(view_.logged_[1].second, 1);
  EXPECT_EQ(view_.logged_[2].second, 2);
}

TEST_F(LearningRateMonitorTest, LogsMomentumOrBeta1WhenAsked) {
  auto sgd = make_sgd(0.1, 0.9);
  auto adam = std::make_shared<torch::optim::Adam>(
      std::vector<at::Tensor>{param()},
      torch::optim::AdamOptions(1e-3).betas(std::make_tuple(0.8, 0.999)));
  view_.optimizers_ = {sgd, adam};
  LearningRateMonitor monitor(std::nullopt, /*log_momentum=*/true);
  train_batch(monitor);
  ASSERT_EQ(view_.logged_.size(), 1u);
  EXPECT_EQ(view_.logged_[0].first, (MetricMap{{"lr-opt0", 0.1},
                                              {"lr-opt0-momentum", 0.9},
                                              {"lr-opt1", 1e-3},
                                              {"lr-opt1-momentum", 0.8}}));
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
