// The batch-size finder with a CPU memory budget: the size found is the largest that fits (each size's
// need measured here with a trial of its own), binsearch and power agree within one doubling, the
// DataModule's batch size is set, the module is put back, and bad options are refused before any trial.
#include <gtest/gtest.h>

#include <map>

#include "support/boring_module.h"
#include "support/temp_dir.h"
#include "tuner/tuner_support.h"
#include "volt/callbacks/batch_size_finder.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"
#include "volt/tuner/tuner.h"

namespace {

using volt::testing::Mlp;
using volt::testing::TempDir;
using volt::testing::TensorDataModule;

constexpr int64_t kIn = 64, kHidden = 512, kClasses = 8;

volt::TrainerOptions options(const std::string& root) {
  return volt::testing::quiet_options(root);
}

/// The CPU memory a fit of 3 steps at batch size `b` adds at most, measured with the callback alone.
int64_t need_of(int64_t b, const std::string& root, const std::shared_ptr<volt::data::TensorDataset>& set) {
  static std::map<int64_t, int64_t> cache;
  if (cache.count(b)) return cache[b];
  torch::manual_seed(1);
  Mlp model(kIn, kHidden, kClasses, 1e-3);
  TensorDataModule data(set, b);
  volt::TrainerOptions o = options(root);
  o.max_steps = 3;
  auto probe = std::make_shared<volt::callbacks::BatchSizeTrial>(0);
  volt::Trainer trainer(o, {probe});
  trainer.fit(model, data);
  return cache[b] = probe->peak_bytes();
}

TEST(CpuMemory, TheCountingAllocatorSeesTensorsComeAndGo) {
  volt::callbacks::track_cpu_memory();
  const auto before = volt::callbacks::cpu_memory();
  volt::callbacks::reset_cpu_memory_peak();
  {
    at::Tensor t = at::empty({1 << 20}, at::kFloat);  // 4 MiB
    EXPECT_GE(volt::callbacks::cpu_memory().live - before.live, int64_t{4} << 20);
  }
  const auto after = volt::callbacks::cpu_memory();
  EXPECT_EQ(after.live, before.live);
  EXPECT_GE(after.peak - before.live, int64_t{4} << 20);
  EXPECT_GT(volt::callbacks::available_system_memory(), 0);
}

class ScaleBatchSize : public ::testing::Test {
 protected:
  void SetUp() override { set_ = volt::testing::blobs(4096, kIn, kClasses, 9); }
  std::shared_ptr<volt::data::TensorDataset> set_;
  TempDir dir_{"volt_bs"};
};

TEST_F(ScaleBatchSize, FindsTheLargestBatchThatFitsTheCpuBudgetInBothModes) {
  // A budget between what 96 and 97 samples need: power stops at 64, binsearch finds 96.
  const int64_t n96 = need_of(96, dir_.str(), set_), n97 = need_of(97, dir_.str(), set_);
  ASSERT_LT(n96, n97) << "memory does not grow with the batch";
  ASSERT_GT(need_of(128, dir_.str(), set_), n97);
  const int64_t budget = (n96 + n97) / 2;
  std::map<std::string, int64_t> found;
  for (const std::string mode : {"power", "binsearch"}) {
    SCOPED_TRACE(mode);
    torch::manual_seed(1);
    Mlp model(kIn, kHidden, kClasses, 1e-3);
    TensorDataModule data(set_, 2);
    volt::Trainer trainer(options(dir_.str()));
    volt::tuner::ScaleBatchSizeOptions o;
    o.mode = mode;
    o.memory_budget_bytes = budget;
    const int64_t size = volt::Tuner(trainer).scale_batch_size(model, data, o);
    EXPECT_EQ(data.batch_size(), size);
    // Checked against the budget, each size measured on its own.
    EXPECT_LE(need_of(size, dir_.str(), set_), budget) << "batch size " << size;
    const int64_t next = mode == "power" ? 2 * size : size + 1;
    EXPECT_GT(need_of(next, dir_.str(), set_), budget) << "batch size " << next << " would have fit too";
    found[mode] = size;
  }
  EXPECT_EQ(found["power"], 64);
  EXPECT_EQ(found["binsearch"], 96);
  // Within one step: binsearch refines inside power's last doubling.
  EXPECT_GE(found["binsearch"], found["power"]);
  EXPECT_LT(found["binsearch"], 2 * found["power"]);
}

TEST_F(ScaleBatchSize, PutsTheModuleBackAndStopsAtTheWholeTrainingSet) {
  torch::manual_seed(2);
  Mlp model(kIn, 16, kClasses, 1e-3, 0.1);
  const auto weights = volt::testing::weights(model);
  TensorDataModule data(volt::testing::blobs(100, kIn, kClasses, 3), 2);
  volt::Trainer trainer(options(dir_.str()));
  volt::tuner::ScaleBatchSizeOptions o;
  o.memory_budget_bytes = int64_t{1} << 40;  // everything fits
  const int64_t size = volt::Tuner(trainer).scale_batch_size(model, data, o);
  // 2, 4, ..., 128: 128 holds all 100 samples, so the doubling stops there.
  EXPECT_EQ(size, 128);
  volt::testing::expect_bitwise_equal(volt::testing::weights(model), weights);
  EXPECT_EQ(trainer.global_step(), 0);
}

TEST_F(ScaleBatchSize, RefusesBadOptionsAndDataModulesWithoutABatchSizeBeforeAnyTrial) {
  volt::testing::BoringModule model(kIn, kClasses);
  TensorDataModule data(set_, 2);
  volt::Trainer trainer(options(dir_.str()));
  const auto refused = [&](volt::tuner::ScaleBatchSizeOptions o, const std::string& word) {
    try {
      volt::Tuner(trainer).scale_batch_size(model, data, o);
      ADD_FAILURE() << "accepted; expected a ConfigError naming " << word;
    } catch (const volt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  volt::tuner::ScaleBatchSizeOptions o;
  o.mode = "linear";
  refused(o, "mode='linear'");
  o = {};
  o.steps_per_trial = 0;
  refused(o, "steps_per_trial=0");
  o = {};
  o.init_val = 0;
  refused(o, "init_val=0");
  o = {};
  o.max_trials = 0;
  refused(o, "max_trials=0");
  o = {};
  o.batch_arg_name = "bs";
  refused(o, "batch_arg_name=\"bs\"");
  o = {};
  o.memory_budget_bytes = -1;
  refused(o, "memory_budget_bytes=-1");
  o = {};
  o.memory_fraction = 1.5;
  refused(o, "memory_fraction=1.5");
  struct NoBatchSize : volt::data::DataModule {
    std::shared_ptr<volt::data::DataLoader> train_dataloader() override {
      return volt::testing::random_loader(64, 8, 1, kIn);
    }
  } plain;
  try {
    volt::Tuner(trainer).scale_batch_size(model, plain);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no batch size to change"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.train_steps, 0);
}

TEST_F(ScaleBatchSize, ABudgetNothingFitsInIsAClearError) {
  Mlp model(kIn, kHidden, kClasses, 1e-3);
  TensorDataModule data(set_, 2);
  volt::Trainer trainer(options(dir_.str()));
  volt::tuner::ScaleBatchSizeOptions o;
  o.memory_budget_bytes = 16;
  try {
    volt::Tuner(trainer).scale_batch_size(model, data, o);
    ADD_FAILURE() << "expected a volt::Error";
  } catch (const volt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no batch size fits"), std::string::npos) << e.what();
  }
  EXPECT_EQ(data.batch_size(), 2) << "the DataModule keeps its batch size";
}

}  // namespace
