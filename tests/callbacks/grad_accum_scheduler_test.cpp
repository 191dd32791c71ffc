#include "volt/callbacks/gradient_accumulation_scheduler.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::callbacks::GradientAccumulationScheduler;
using volt::testing::BoringModule;
using volt::testing::mentions;
using volt::testing::ScratchDir;
using Plan = std::map<int64_t, int64_t>;

/// global_step at each training epoch end, and the factor each epoch ran with.
class StepsPerEpoch : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "StepsPerEpoch"; }
  void on_train_batch_start(volt::TrainerView& view, const volt::Batch&, int64_t) override {
    factor = view.state().accumulate_grad_batches;
  }
  void on_train_epoch_end(volt::TrainerView& view) override {
    steps.push_back(view.state().global_step);
    factors.push_back(factor);
  }
  std::vector<int64_t> steps, factors;
  int64_t factor = 0;
};

class ManualModule : public BoringModule {
 public:
  ManualModule() { set_automatic_optimization(false); }
};

std::shared_ptr<GradientAccumulationScheduler> schedule(std::map<int64_t, int64_t> s) {
  return std::make_shared<GradientAccumulationScheduler>(std::move(s));
}

}  // namespace

TEST(GradientAccumulationScheduler, RefusesAnEmptyScheduleNegativeEpochsAndFactorsBelowOne) {
  using volt::testing::error_message;
  EXPECT_TRUE(mentions(error_message<ConfigError>([] { GradientAccumulationScheduler(Plan{}); }), {"empty"}));
  EXPECT_TRUE(mentions(error_message<ConfigError>([] {
                         GradientAccumulationScheduler(Plan{{-1, 2}, {3, 4}});
                       }),
                       {"0 or more", "[-1, 3]"}));
  EXPECT_TRUE(mentions(error_message<ConfigError>([] {
                         GradientAccumulationScheduler(Plan{{0, 1}, {2, 0}});
                       }),
                       {"1 or more", "[1, 0]", "epoch 2 has 0"}));
}

TEST(GradientAccumulationScheduler, EachEpochTakesTheFactorOfTheLastScheduledEpochBeforeIt) {
  GradientAccumulationScheduler s(Plan{{2, 3}, {5, 8}});
  EXPECT_EQ(s.scheduling(), (std::map<int64_t, int64_t>{{0, 1}, {2, 3}, {5, 8}}));  // {0: 1} added
  const std::vector<int64_t> expected = {1, 1, 3, 3, 3, 8, 8};
  for (int64_t e = 0; e < 7; ++e) EXPECT_EQ(s.get_accumulate_grad_batches(e), expected[e]) << "epoch " << e;
  EXPECT_EQ(s.get_accumulate_grad_batches(1000), 8);
  EXPECT_TRUE(s.going_to_accumulate_grad_batches());
  EXPECT_FALSE(GradientAccumulationScheduler(Plan{{0, 1}}).going_to_accumulate_grad_batches());
  EXPECT_EQ(GradientAccumulationScheduler(Plan{{0, 4}}).scheduling(), (std::map<int64_t, int64_t>{{0, 4}}));
  EXPECT_EQ(s.state_key(), "GradientAccumulationScheduler{0: 1, 2: 3, 5: 8}");
}

TEST(GradientAccumulationScheduler, RefusesTheAccumulateGradBatchesFlagWhenTheTrainerIsBuilt) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.accumulate_grad_batches = 2;
  EXPECT_TRUE(mentions(volt::testing::error_message<ConfigError>([&] {
                         volt::Trainer(o, {schedule({{0, 2}})});
                       }),
                       {"accumulate_grad_batches=2", "GradientAccumulationScheduler", "Remove"}));
}

TEST(GradientAccumulationScheduler, RefusesManualOptimizationBeforeAnyBatch) {
  ScratchDir dir;
  volt::Trainer trainer(volt::testing::quiet_options(dir.path()), {schedule({{0, 2}})});
  ManualModule m;
  EXPECT_TRUE(mentions(
      volt::testing::error_message<ConfigError>([&] { trainer.fit(m, volt::testing::random_loader(8, 2, 1)); }),
      {"GradientAccumulationScheduler", "manual optimization"}));
  EXPECT_EQ(m.train_steps, 0);
}

TEST(GradientAccumulationScheduler, ChangesTheOptimizerStepsPerEpochAsScheduled) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 4;
  auto spy = std::make_shared<StepsPerEpoch>();
  volt::Trainer trainer(o, {spy, schedule({{1, 2}, {2, 3}, {3, 8}})});
  BoringModule m;
  trainer.fit(m, volt::testing::random_loader(16, 2, 1));  // 8 batches an epoch
  // Epoch 0: 8 steps; 1: 4; 2: 3 (3 + 3 + the last 2 batches); 3: 1.
  EXPECT_EQ(spy->steps, (std::vector<int64_t>{8, 12, 15, 16}));
  EXPECT_EQ(spy->factors, (std::vector<int64_t>{1, 2, 3, 8}));
  EXPECT_EQ(m.train_steps, 32);
}

// The same schedule written out by hand: the loss of each micro-batch divided by the
// epoch's factor, a step after every `factor` batches and after the epoch's last batch.
TEST(GradientAccumulationScheduler, WeightsEqualAHandWrittenLoopWithTheSameSchedule) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 3;
  const std::map<int64_t, int64_t> plan = {{0, 1}, {1, 3}, {2, 2}};
  auto loader = volt::testing::random_loader(14, 2, 5);  // 7 batches an epoch
  BoringModule trained;
  BoringModule by_hand;
  {
    at::NoGradGuard no_grad;
    by_hand.layer->weight.copy_(trained.layer->weight);
    by_hand.layer->bias.copy_(trained.layer->bias);
  }
  volt::Trainer trainer(o, {schedule(plan)});
  trainer.fit(trained, loader);

  torch::optim::SGD opt(by_hand.parameters(), torch::optim::SGDOptions(by_hand.lr));
  auto data = volt::testing::random_dataset(14, 5);
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const int64_t factor = plan.at(epoch);
    for (int64_t b = 0; b < 7; ++b) {
      volt::Batch batch = data->get_batch({2 * b, 2 * b + 1});
      at::Tensor loss = by_hand.loss_of(batch);
      (factor > 1 ? loss / static_cast<double>(factor) : loss).backward();
      if ((b + 1) % factor == 0 || b + 1 == 7) {
        opt.step();
        opt.zero_grad();
        ++steps;
      }
    }
  }
  EXPECT_EQ(trainer.global_step(), steps);
  volt::testing::expect_bitwise_equal(volt::testing::weights(trained), volt::testing::weights(by_hand));
}

TEST(GradientAccumulationScheduler, AResumedRunKeepsTheScheduleOfItsEpoch) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 3;
  auto loader = volt::testing::random_loader(16, 2, 1);  // 8 batches
  const std::map<int64_t, int64_t> plan = {{0, 1}, {1, 4}, {2, 2}};
  BoringModule full;
  BoringModule part;
  {
    at::NoGradGuard no_grad;
    part.layer->weight.copy_(full.layer->weight);
    part.layer->bias.copy_(full.layer->bias);
  }
  volt::Trainer whole(o, {schedule(plan)});
  whole.fit(full, loader);
  const std::string path = dir / "after_two.ckpt";
  {
    auto o2 = o;
    o2.max_epochs = 2;
    volt::Trainer first(o2, {schedule(plan)});
    first.fit(part, loader);
    first.save_checkpoint(path);
  }
  volt::Trainer second(o, {schedule(plan)});
  second.fit(part, loader, nullptr, path);
  EXPECT_EQ(second.global_step(), whole.global_step());
  EXPECT_EQ(whole.global_step(), 8 + 2 + 4);
  volt::testing::expect_bitwise_equal(volt::testing::weights(part), volt::testing::weights(full));
}
