// The LearningRateFinder and BatchSizeFinder callbacks (Lightning's): added to a Trainer, the search
// runs at the start of fit, its result is applied, and the same fit then trains for max_epochs from
// its start, ending with the weights of Tuner-then-fit, bit for bit. And the batch-size finder's
// out-of-memory path: LibTorch's c10::OutOfMemoryError is a trial that did not fit; other errors are not.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <stdexcept>

#include "support/boring_module.h"
#include "support/temp_dir.h"
#include "tuner/tuner_support.h"
#include "volt/callbacks/batch_size_finder.h"
#include "volt/callbacks/learning_rate_finder.h"
#include "volt/core/error.h"
#include "volt/core/out_of_memory_error.h"
#include "volt/trainer/trainer.h"
#include "volt/tuner/tuner.h"

namespace {

using volt::testing::hex;
using volt::testing::Mlp;
using volt::testing::TempDir;
using volt::testing::TensorDataModule;

/// What the fit's other callbacks see: fit starts, training batches, and the optimizer's learning
/// rate at every batch.
class Recorder : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "Recorder"; }
  void on_fit_start(volt::TrainerView&) override { ++fit_starts; }
  void on_train_batch_start(volt::TrainerView& view, const volt::Batch&, int64_t) override {
    lrs.push_back(view.optimizers().at(0)->param_groups().at(0).options().get_lr());
  }
  int fit_starts = 0;
  std::vector<double> lrs;
};

/// How SmallDeviceMlp fails past its limit.
enum class Failure { kCudaOom, kOomTypeOnly, kOtherLibTorchError, kStdError };

/// An Mlp whose training step fails as a device does when the batch holds more than `limit` samples.
class SmallDeviceMlp : public Mlp {
 public:
  SmallDeviceMlp(int64_t limit, Failure failure) : Mlp(16, 32, 4, 1e-3, 0.2), limit_(limit), failure_(failure) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const int64_t n = batch[0].size(0);
    if (n > limit_) {
      switch (failure_) {
        case Failure::kCudaOom:
          // CUDA's caching allocator's error: its type and its text.
          TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB (batch ", n, ")");
          break;
        case Failure::kOomTypeOnly:
          TORCH_CHECK_WITH(OutOfMemoryError, false, "the test device is full at batch ", n);
          break;
        case Failure::kOtherLibTorchError:
          TORCH_CHECK(false, "a shape this model cannot take at batch ", n);
          break;
        case Failure::kStdError:
          throw std::runtime_error("the model broke at batch " + std::to_string(n));
      }
    }
    return Mlp::training_step(batch, ctx);
  }

 private:
  int64_t limit_;
  Failure failure_;
};

volt::TrainerOptions finder_options(const std::string& root, int64_t max_epochs) {
  volt::TrainerOptions o = volt::testing::quiet_options(root);
  o.max_epochs = max_epochs;
  return o;
}

TEST(LearningRateFinderCallback, SetsTheSuggestionAndTrainsMaxEpochsFromTheStartAsTunerThenFit) {
  TempDir dir("volt_lr_callback");
  const auto set = volt::testing::blobs(256, 16, 4, 5);  // 8 batches of 32 per epoch
  volt::callbacks::LearningRateFinderOptions sweep;
  sweep.num_training_steps = 20;  // longer than an epoch, as in Lightning's own example run
  sweep.early_stop_threshold = std::nullopt;

  // The callback in the fit.
  torch::manual_seed(3);
  Mlp with(16, 32, 4, 1e-3, /*dropout=*/0.2);
  TensorDataModule data_with(set, 32);
  auto finder = std::make_shared<volt::callbacks::LearningRateFinder>(sweep);
  auto recorder = std::make_shared<Recorder>();
  volt::Trainer trainer(finder_options(dir.str(), 3), {recorder, finder});
  trainer.fit(with, data_with);
  ASSERT_TRUE(finder->optimal_lr().has_value());
  ASSERT_NE(finder->sweep(), nullptr);
  EXPECT_EQ(finder->sweep()->lrs().size(), 20u);
  const double lr = *finder->optimal_lr();
  EXPECT_NE(lr, 1e-3);
  // The fit trained max_epochs from the start at the suggestion; the sweep was not part of it.
  EXPECT_EQ(trainer.global_step(), 3 * 8);
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(recorder->fit_starts, 1);
  ASSERT_EQ(recorder->lrs.size(), 24u);
  for (double seen : recorder->lrs) EXPECT_EQ(seen, lr);
  EXPECT_EQ(std::strtod(with.hparams().at("lr").c_str(), nullptr), lr) << "update_attr wrote the suggestion";

  // Tuner, then fit: the same rate and, bit for bit, the same weights.
  torch::manual_seed(3);
  Mlp then(16, 32, 4, 1e-3, /*dropout=*/0.2);
  TensorDataModule data_then(set, 32);
  volt::Trainer plain(finder_options(dir.str(), 3));
  volt::tuner::LRFindOptions f;
  f.num_training = 20;
  f.early_stop_threshold = std::nullopt;
  f.update_attr = true;
  EXPECT_EQ(volt::Tuner(plain).lr_find(then, data_then, f).suggestion(), lr);
  plain.fit(then, data_then);
  EXPECT_EQ(plain.global_step(), 24);
  volt::testing::expect_bitwise_equal(volt::testing::weights(with), volt::testing::weights(then));
}

TEST(LearningRateFinderCallback, WithoutUpdateAttrStillTrainsAtTheSuggestionAndKeepsTheHyperparameter) {
  TempDir dir("volt_lr_callback_noattr");
  torch::manual_seed(4);
  Mlp model(16, 32, 4, 1e-3);
  TensorDataModule data(volt::testing::blobs(256, 16, 4, 6), 32);
  volt::callbacks::LearningRateFinderOptions sweep;
  sweep.num_training_steps = 30;
  auto finder = std::make_shared<volt::callbacks::LearningRateFinder>(sweep, /*update_attr=*/false);
  auto recorder = std::make_shared<Recorder>();
  volt::Trainer trainer(finder_options(dir.str(), 2), {finder, recorder});
  trainer.fit(model, data);
  ASSERT_TRUE(finder->optimal_lr().has_value());
  EXPECT_EQ(model.hparams().at("lr"), hex(1e-3));
  ASSERT_EQ(recorder->lrs.size(), 16u);
  for (double seen : recorder->lrs) EXPECT_EQ(seen, *finder->optimal_lr());
  EXPECT_EQ(trainer.global_step(), 16);
}

TEST(LearningRateFinderCallback, RefusesAModuleWithoutALearningRateHyperparameterBeforeAnyStep) {
  TempDir dir("volt_lr_callback_refuse");
  volt::testing::BoringModule model;
  auto finder = std::make_shared<volt::callbacks::LearningRateFinder>();
  volt::Trainer trainer(finder_options(dir.str(), 1), {finder});
  try {
    trainer.fit(model, volt::testing::random_loader(64, 32, 1));
    ADD_FAILURE() << "fit accepted a module without an lr hyperparameter";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("neither \"lr\" nor \"learning_rate\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(trainer.global_step(), 0);
}

TEST(FinderCallbacks, RefuseLaunchersThatWouldStartTheRanksAgainAndACheckpointToResumeBeforeAnyStep) {
  TempDir dir("volt_finder_refusals");
  const auto set = volt::testing::blobs(256, 16, 4, 7);
  const std::vector<std::shared_ptr<volt::callbacks::Callback>> finders{
      std::make_shared<volt::callbacks::LearningRateFinder>(), std::make_shared<volt::callbacks::BatchSizeFinder>()};
  for (const auto& finder : finders) {
    SCOPED_TRACE(finder->state_key());
    for (const std::string strategy : {"ddp", "ddp_spawn"}) {
      SCOPED_TRACE(strategy);
      volt::TrainerOptions o = finder_options(dir.str(), 1);
      o.strategy = strategy;
      o.devices = "2";
      o.allow_cpu_oversubscription = true;
      volt::Trainer trainer(o, {finder});
      Mlp model(16, 32, 4, 1e-3);
      TensorDataModule data(set, 32);
      try {
        trainer.fit(model, data);
        ADD_FAILURE() << "expected a NotSupportedError";
      } catch (const volt::NotSupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("volt launch"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(finder->state_key()), std::string::npos) << e.what();
      }
      EXPECT_EQ(trainer.global_step(), 0);
    }
    volt::Trainer trainer(finder_options(dir.str(), 1), {finder});
    Mlp model(16, 32, 4, 1e-3);
    const auto before = volt::testing::weights(model);
    TensorDataModule data(set, 32);
    try {
      trainer.fit(model, data, dir.str() + "/some.ckpt");
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const volt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("ckpt_path"), std::string::npos) << e.what();
    }
    volt::testing::expect_bitwise_equal(volt::testing::weights(model), before);
  }
}

TEST(BatchSizeFinderCallback, SetsTheLargestSizeThatFitsAndTrainsMaxEpochsFromTheStartAsTunerThenFit) {
  TempDir dir("volt_bs_callback");
  const auto set = volt::testing::blobs(512, 16, 4, 7);
  for (const std::string mode : {"power", "binsearch"}) {
    SCOPED_TRACE(mode);
    const int64_t expected = mode == "power" ? 32 : 40;  // the device holds 40 samples
    volt::callbacks::BatchSizeFinderOptions o;
    o.mode = mode;
    o.steps_per_trial = 2;
    o.memory_budget_bytes = int64_t{1} << 40;  // only the device's error limits the size

    torch::manual_seed(5);
    SmallDeviceMlp with(40, Failure::kCudaOom);
    TensorDataModule data_with(set, 8);
    auto finder = std::make_shared<volt::callbacks::BatchSizeFinder>(o);
    auto recorder = std::make_shared<Recorder>();
    volt::Trainer trainer(finder_options(dir.str(), 2), {recorder, finder});
    trainer.fit(with, data_with);
    EXPECT_EQ(finder->optimal_batch_size(), expected);
    EXPECT_EQ(data_with.batch_size(), expected);
    const int64_t per_epoch = (512 + expected - 1) / expected;
    EXPECT_EQ(trainer.global_step(), 2 * per_epoch);
    EXPECT_EQ(recorder->fit_starts, 1);
    EXPECT_EQ(static_cast<int64_t>(recorder->lrs.size()), 2 * per_epoch);

    torch::manual_seed(5);
    SmallDeviceMlp then(40, Failure::kCudaOom);
    TensorDataModule data_then(set, 8);
    volt::Trainer plain(finder_options(dir.str(), 2));
    volt::tuner::ScaleBatchSizeOptions s;
    s.mode = mode;
    s.steps_per_trial = 2;
    s.memory_budget_bytes = o.memory_budget_bytes;
    EXPECT_EQ(volt::Tuner(plain).scale_batch_size(then, data_then, s), expected);
    plain.fit(then, data_then);
    volt::testing::expect_bitwise_equal(volt::testing::weights(with), volt::testing::weights(then));
  }
}

TEST(BatchSizeFinderCallback, RefusesAFitGivenLoadersAndPassesOtherErrorsOnLeavingTheBatchSize) {
  TempDir dir("volt_bs_callback_refuse");
  const auto set = volt::testing::blobs(512, 16, 4, 7);
  {
    SmallDeviceMlp model(40, Failure::kCudaOom);
    volt::Trainer trainer(finder_options(dir.str(), 1), {std::make_shared<volt::callbacks::BatchSizeFinder>()});
    EXPECT_THROW(trainer.fit(model, TensorDataModule(set, 8).train_dataloader()), volt::ConfigError);
  }
  SmallDeviceMlp model(40, Failure::kStdError);
  const auto before = volt::testing::weights(model);
  TensorDataModule data(set, 8);
  volt::callbacks::BatchSizeFinderOptions o;
  o.memory_budget_bytes = int64_t{1} << 40;
  volt::Trainer trainer(finder_options(dir.str(), 1), {std::make_shared<volt::callbacks::BatchSizeFinder>(o)});
  try {
    trainer.fit(model, data);
    ADD_FAILURE() << "the model's error was swallowed";
  } catch (const volt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model broke at batch 64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(data.batch_size(), 8);
  volt::testing::expect_bitwise_equal(volt::testing::weights(model), before);
  EXPECT_EQ(trainer.global_step(), 0);
}

TEST(OutOfMemory, LibTorchsOutOfMemoryErrorLeavesAFitAsVoltsOutOfMemoryError) {
  TempDir dir("volt_oom_kind");
  const auto set = volt::testing::blobs(128, 16, 4, 8);
  for (const Failure failure : {Failure::kCudaOom, Failure::kOomTypeOnly}) {
    SmallDeviceMlp model(40, failure);
    TensorDataModule data(set, 64);
    volt::Trainer trainer(finder_options(dir.str(), 1));
    EXPECT_THROW(trainer.fit(model, data), volt::OutOfMemoryError);
  }
  SmallDeviceMlp model(40, Failure::kOtherLibTorchError);
  TensorDataModule data(set, 64);
  volt::Trainer trainer(finder_options(dir.str(), 1));
  try {
    trainer.fit(model, data);
    ADD_FAILURE() << "no error";
  } catch (const volt::OutOfMemoryError& e) {
    ADD_FAILURE() << "a shape error became an out-of-memory error: " << e.what();
  } catch (const volt::Error&) {
  }
}

class ScaleBatchSizeOom : public ::testing::Test {
 protected:
  void SetUp() override { set_ = volt::testing::blobs(512, 16, 4, 9); }
  std::shared_ptr<volt::data::TensorDataset> set_;
  TempDir dir_{"volt_bs_oom"};
};

TEST_F(ScaleBatchSizeOom, PowerAndBinsearchFindTheLargestSizeBeforeTheOutOfMemoryErrorAndPutTheModuleBack) {
  for (const Failure failure : {Failure::kCudaOom, Failure::kOomTypeOnly}) {
    for (const std::string mode : {"power", "binsearch"}) {
      SCOPED_TRACE(mode + (failure == Failure::kCudaOom ? " CUDA message" : " type only"));
      torch::manual_seed(6);
      SmallDeviceMlp model(40, failure);
      const auto before = volt::testing::weights(model);
      const at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
      TensorDataModule data(set_, 8);
      volt::Trainer trainer(finder_options(dir_.str(), 1));
      volt::tuner::ScaleBatchSizeOptions o;
      o.mode = mode;
      o.memory_budget_bytes = int64_t{1} << 40;
      const int64_t size = volt::Tuner(trainer).scale_batch_size(model, data, o);
      // power: 2 .. 32 fit, 64 fails; binsearch then: 48 fails, 40 fits, 44, 42, 41 fail.
      EXPECT_EQ(size, mode == "power" ? 32 : 40);
      EXPECT_EQ(data.batch_size(), size);
      volt::testing::expect_bitwise_equal(volt::testing::weights(model), before);
      EXPECT_TRUE(at::detail::getDefaultCPUGenerator().get_state().equal(rng));
      EXPECT_EQ(trainer.global_step(), 0);
    }
  }
}

TEST_F(ScaleBatchSizeOom, AnErrorThatIsNotOutOfMemoryIsNotSwallowed) {
  for (const Failure failure : {Failure::kOtherLibTorchError, Failure::kStdError}) {
    SCOPED_TRACE(failure == Failure::kStdError ? "std::runtime_error" : "c10::Error");
    torch::manual_seed(7);
    SmallDeviceMlp model(40, failure);
    const auto before = volt::testing::weights(model);
    TensorDataModule data(set_, 8);
    volt::Trainer trainer(finder_options(dir_.str(), 1));
    volt::tuner::ScaleBatchSizeOptions o;
    o.memory_budget_bytes = int64_t{1} << 40;
    try {
      volt::Tuner(trainer).scale_batch_size(model, data, o);
      ADD_FAILURE() << "the error was counted as out of memory";
    } catch (const volt::OutOfMemoryError& e) {
      ADD_FAILURE() << "became an out-of-memory error: " << e.what();
    } catch (const volt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("at batch 64"), std::string::npos) << e.what();
    }
    EXPECT_EQ(data.batch_size(), 8);
    volt::testing::expect_bitwise_equal(volt::testing::weights(model), before);
  }
}

}  // namespace
