#include "volt/callbacks/timer.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "support/fake_trainer_view.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/duration.h"
#include "volt/core/error.h"
#include "volt/core/trainer_flags.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::RunningStage;
using volt::callbacks::Timer;
using volt::testing::BoringModule;
using volt::testing::mentions;
using volt::testing::ScratchDir;

/// A clock the test moves: each training step advances it by `step_s`.
struct FakeClock {
  double now = 1000.0;
  Timer::Clock clock() {
    return [this] { return now; };
  }
};

class TickingModule : public BoringModule {
 public:
  TickingModule(FakeClock& clock, double step_s) : clock_(clock), step_s_(step_s) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    clock_.now += step_s_;
    return BoringModule::training_step(batch, ctx);
  }

 private:
  FakeClock& clock_;
  double step_s_;
};

/// When each training batch ended, on the real clock, from the start of training.
class BatchEndTimes : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "BatchEndTimes"; }
  void on_train_start(volt::TrainerView&) override { start_ = std::chrono::steady_clock::now(); }
  void on_train_batch_end(volt::TrainerView&, const at::Tensor&, const volt::Batch&, int64_t) override {
    ends.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  std::vector<double> ends;

 private:
  std::chrono::steady_clock::time_point start_;
};

class SleepingModule : public BoringModule {
 public:
  explicit SleepingModule(int ms) : ms_(ms) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    return BoringModule::training_step(batch, ctx);
  }

 private:
  int ms_;
};

std::vector<std::string> checkpoints_in(const std::string& dir) {
  return volt::testing::files_under(dir);
}

}  // namespace

TEST(Duration, ReadsLightningsDDHHMMSSAndPlainSeconds) {
  EXPECT_EQ(volt::parse_duration("00:12:00:00", "max_time"), 12 * 3600.0);
  EXPECT_EQ(volt::parse_duration("01:02:03:04", "max_time"), 86400.0 + 2 * 3600 + 3 * 60 + 4);
  EXPECT_EQ(volt::parse_duration("00:36:00:00", "max_time"), 36 * 3600.0);  // a field may exceed its unit
  EXPECT_EQ(volt::parse_duration(" 00:00:01:30 ", "max_time"), 90.0);
  EXPECT_EQ(volt::parse_duration("90", "max_time"), 90.0);
  EXPECT_EQ(volt::parse_duration("0.5", "max_time"), 0.5);
  EXPECT_EQ(volt::parse_duration("00:00:00:00", "max_time"), 0.0);
  EXPECT_EQ(volt::format_duration(3783.9), "1:03:03");
  EXPECT_EQ(volt::format_duration(2 * 86400 + 5), "2 days, 0:00:05");
}

TEST(Duration, RefusesOtherSpellingsNamingTheTextAndBothForms) {
  for (const std::string bad : {"1:2:3", "00:00:00:00:00", "a:b:c:d", "00:-1:00:00", "00:00:1.5:00", "-5", "1e3", "inf",
                                "nan", "", "  ", "0x10", "1.2.3", "ten", "99999999999:00:00:00"}) {
    const std::string msg = volt::testing::error_message<ConfigError>([&] { volt::parse_duration(bad, "max_time"); });
    EXPECT_TRUE(mentions(msg, {"max_time='" + bad + "'", "DD:HH:MM:SS", "seconds"})) << bad;
  }
}

TEST(Duration, TheMaxTimeFlagIsCheckedWithTheOtherFlags) {
  volt::TrainerOptions o;
  o.max_time = "12:00";
  EXPECT_TRUE(mentions(volt::testing::error_message<ConfigError>([&] { volt::check_trainer_flags(o); }),
                       {"max_time='12:00'", "4"}));
  o.max_time = "00:00:10:00";
  EXPECT_NO_THROW(volt::check_trainer_flags(o));
  const volt::TrainerFlag* row = volt::find_trainer_flag("max_time");
  ASSERT_NE(row, nullptr);
  // Right after max_steps in the table (and so in --help and README.md).
  const auto& flags = volt::trainer_flags();
  for (size_t i = 1; i < flags.size(); ++i) {
    if (std::string(flags[i].name) == "max_time") {
      EXPECT_STREQ(flags[i - 1].name, "max_steps");
    }
  }
}

TEST(Timer, RefusesAnUnknownIntervalAndABadDuration) {
  EXPECT_TRUE(mentions(volt::testing::error_message<ConfigError>([] { Timer("00:00:01:00", "batch"); }),
                       {"interval='batch'", "step", "epoch"}));
  EXPECT_TRUE(mentions(volt::testing::error_message<ConfigError>([] { Timer(-1.0); }), {"-1", "non-negative"}));
  EXPECT_TRUE(
      mentions(volt::testing::error_message<ConfigError>([] { Timer("1:00", "step"); }), {"Timer duration='1:00'"}));
  EXPECT_EQ(Timer("00:01:00:00", "epoch").duration(), 3600.0);
  EXPECT_EQ(Timer("00:01:00:00", "epoch").interval(), Timer::Interval::kEpoch);
  EXPECT_FALSE(Timer("", "step").duration().has_value());
}

TEST(Timer, MeasuresTrainingValidationAndTestingApart) {
  FakeClock c;
  Timer timer(100.0, Timer::Interval::kStep, true, c.clock());
  volt::testing::FakeTrainerView view;
  EXPECT_EQ(timer.time_elapsed(), 0.0);
  EXPECT_FALSE(timer.start_time().has_value());
  timer.on_train_start(view);
  c.now += 4;
  timer.on_validation_start(view);
  c.now += 3;
  EXPECT_EQ(timer.time_elapsed(RunningStage::kValidating), 3.0);  // running: up to now
  timer.on_validation_end(view);
  c.now += 5;
  timer.on_train_end(view);
  c.now += 50;  // after the end: nothing more counts
  timer.on_test_start(view);
  c.now += 2;
  timer.on_test_end(view);
  EXPECT_EQ(timer.time_elapsed(RunningStage::kTraining), 12.0);
  EXPECT_EQ(timer.time_elapsed(RunningStage::kValidating), 3.0);
  EXPECT_EQ(timer.time_elapsed(RunningStage::kTesting), 2.0);
  EXPECT_EQ(timer.time_elapsed(RunningStage::kPredicting), 0.0);
  EXPECT_EQ(timer.time_remaining(), 88.0);
  EXPECT_EQ(timer.start_time(), 1000.0);
  EXPECT_EQ(timer.end_time(), 1012.0);
  const auto state = timer.state_dict();
  EXPECT_EQ(state["time_elapsed"]["train"], 12.0);
  EXPECT_EQ(state["time_elapsed"]["validate"], 3.0);
  EXPECT_EQ(state["time_elapsed"]["test"], 2.0);
  EXPECT_EQ(state["time_elapsed"]["sanity_check"], 0.0);
  EXPECT_TRUE(view.stop_reasons_.empty());
  EXPECT_FALSE(Timer().time_remaining().has_value());
}

TEST(Timer, AskedToStopOnceWhenTheTimeRunsOutAtABatchEnd) {
  FakeClock c;
  Timer timer(10.0, Timer::Interval::kStep, true, c.clock());
  volt::testing::FakeTrainerView view;
  timer.on_train_start(view);
  c.now += 9.5;
  timer.on_train_batch_end(view, at::Tensor(), volt::Batch(), 0);
  EXPECT_TRUE(view.stop_reasons_.empty());
  c.now += 0.5;
  timer.on_train_batch_end(view, at::Tensor(), volt::Batch(), 1);
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_TRUE(mentions(view.stop_reasons_[0], {"Time limit reached", "0:00:10"}));
  timer.on_train_batch_end(view, at::Tensor(), volt::Batch(), 2);
  EXPECT_EQ(view.stop_reasons_.size(), 1u);
  // The epoch interval does not check at batch ends.
  Timer by_epoch(1.0, Timer::Interval::kEpoch, true, c.clock());
  volt::testing::FakeTrainerView view2;
  by_epoch.on_train_start(view2);
  c.now += 5;
  by_epoch.on_train_batch_end(view2, at::Tensor(), volt::Batch(), 0);
  EXPECT_TRUE(view2.stop_reasons_.empty());
  by_epoch.on_train_epoch_end(view2);
  EXPECT_EQ(view2.stop_reasons_.size(), 1u);
}

TEST(Timer, StopsAFitAfterTheBatchInWhichTheTimeRanOutAndModelCheckpointSaves) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.enable_checkpointing = true;
  FakeClock c;
  auto timer = std::make_shared<Timer>(10.0, Timer::Interval::kStep, true, c.clock());
  volt::callbacks::ModelCheckpoint::Options mo;
  mo.dirpath = dir / "ckpts";
  volt::Trainer trainer(o, {timer, std::make_shared<volt::callbacks::ModelCheckpoint>(mo)});
  TickingModule m(c, 1.0);                                 // each step: one second
  trainer.fit(m, volt::testing::random_loader(64, 2, 1));  // 32 batches
  EXPECT_EQ(trainer.global_step(), 10);
  EXPECT_EQ(m.train_steps, 10);
  EXPECT_EQ(timer->time_elapsed(), 10.0);
  EXPECT_EQ(checkpoints_in(dir / "ckpts"), std::vector<std::string>{"epoch=0-step=10.ckpt"});
}

TEST(Timer, EpochIntervalStopsAtTheFirstEpochEndPastTheLimit) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 10;
  FakeClock c;
  auto timer = std::make_shared<Timer>(6.0, Timer::Interval::kEpoch, false, c.clock());
  volt::Trainer trainer(o, {timer});
  TickingModule m(c, 1.0);
  trainer.fit(m, volt::testing::random_loader(8, 2, 1));  // 4 batches: 4 s an epoch
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_EQ(trainer.global_step(), 8);
}

TEST(Timer, MinEpochsHoldsTheStopBack) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 10;
  o.min_epochs = 3;
  FakeClock c;
  volt::Trainer trainer(o, {std::make_shared<Timer>(1.0, Timer::Interval::kStep, false, c.clock())});
  TickingModule m(c, 1.0);
  trainer.fit(m, volt::testing::random_loader(8, 2, 1));
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(trainer.global_step(), 12);
}

TEST(Timer, AResumedRunCountsTheTrainingTimeItsCheckpointHolds) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 100;
  auto loader = volt::testing::random_loader(16, 2, 1);  // 8 batches
  const std::string path = dir / "stopped.ckpt";
  FakeClock c;
  {
    auto timer = std::make_shared<Timer>(10.0, Timer::Interval::kStep, false, c.clock());
    volt::Trainer first(o, {timer});
    TickingModule m(c, 1.0);
    first.fit(m, loader);
    ASSERT_EQ(first.global_step(), 10);
    first.save_checkpoint(path);
  }
  const auto ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path);
  EXPECT_EQ(ckpt.meta["callbacks"]["Timer"]["time_elapsed"]["train"], 10.0);
  // 15 s in all: 5 more steps after the 10 s already spent.
  auto timer = std::make_shared<Timer>(15.0, Timer::Interval::kStep, false, c.clock());
  volt::Trainer second(o, {timer});
  TickingModule m(c, 1.0);
  second.fit(m, loader, nullptr, path);
  EXPECT_EQ(second.global_step(), 15);
  EXPECT_EQ(m.train_steps, 5);
  EXPECT_EQ(timer->time_elapsed(), 15.0);
  // A limit already spent: stopped before the first batch.
  auto spent = std::make_shared<Timer>(8.0, Timer::Interval::kStep, false, c.clock());
  volt::Trainer third(o, {spent});
  TickingModule m3(c, 1.0);
  third.fit(m3, loader, nullptr, path);
  EXPECT_EQ(m3.train_steps, 0);
  EXPECT_EQ(third.global_step(), 10);
}

TEST(Timer, RefusesACheckpointWhoseTrainingTimeIsNotANumber) {
  Timer timer;
  EXPECT_TRUE(mentions(volt::testing::error_message<volt::CheckpointError>([&] {
                         timer.load_state_dict({{"time_elapsed", {{"train", "ten"}}}});
                       }),
                       {"time_elapsed.train=\"ten\""}));
  EXPECT_TRUE(mentions(volt::testing::error_message<volt::CheckpointError>([&] {
                         timer.load_state_dict({{"time_elapsed", {{"train", -3.0}}}});
                       }),
                       {"-3"}));
  timer.load_state_dict({{"time_elapsed", {{"train", 7.0}}}});
  EXPECT_EQ(timer.time_elapsed(), 7.0);
}

// The flag with the real clock: the run stops at the first batch end past the limit.
TEST(Timer, MaxTimeFlagStopsARealRunAtTheFirstBatchEndPastTheLimit) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.enable_checkpointing = true;
  o.max_time = "0.4";
  auto ends = std::make_shared<BatchEndTimes>();
  volt::Trainer trainer(o, {ends});
  SleepingModule m(25);
  trainer.fit(m, volt::testing::random_loader(400, 2, 1));  // 200 batches: 5 s without the limit
  ASSERT_GE(ends->ends.size(), 2u);
  EXPECT_LT(ends->ends.size(), 200u);
  // The Timer runs after this callback, so its clock reads a little later at each batch end.
  EXPECT_GE(ends->ends.back(), 0.4 - 0.02);
  EXPECT_LT(ends->ends[ends->ends.size() - 2], 0.4 + 0.02);
  const std::string expected = "epoch=0-step=" + std::to_string(trainer.global_step()) + ".ckpt";
  EXPECT_EQ(checkpoints_in(dir.path() + "/checkpoints"), std::vector<std::string>{expected});
}

TEST(Timer, AGivenTimerTakesPrecedenceOverMaxTime) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_time = "00:00:00:00";  // would stop at once
  FakeClock c;
  volt::Trainer trainer(o, {std::make_shared<Timer>(3.0, Timer::Interval::kStep, false, c.clock())});
  TickingModule m(c, 1.0);
  trainer.fit(m, volt::testing::random_loader(16, 2, 1));
  EXPECT_EQ(trainer.global_step(), 3);
}

// Lightning: a Timer (or max_time) lifts the default limit of 1000 epochs, as max_steps does.
TEST(Timer, ATimerLiftsTheDefaultLimitOf1000Epochs) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = -1;
  FakeClock c;
  volt::Trainer trainer(o, {std::make_shared<Timer>(1200.0, Timer::Interval::kStep, false, c.clock())});
  TickingModule m(c, 1.0);
  trainer.fit(m, volt::testing::random_loader(1, 1, 1));  // one batch an epoch
  EXPECT_EQ(trainer.current_epoch(), 1200);
  ScratchDir dir2;
  auto o2 = volt::testing::quiet_options(dir2.path());
  o2.max_epochs = -1;
  volt::Trainer bounded(o2);
  BoringModule b;
  bounded.fit(b, volt::testing::random_loader(1, 1, 1));
  EXPECT_EQ(bounded.current_epoch(), 1000);
}
