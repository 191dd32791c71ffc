#include "volt/callbacks/on_exception_checkpoint.h"

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::callbacks::OnExceptionCheckpoint;
using volt::testing::BoringModule;
using volt::testing::mentions;
using volt::testing::ScratchDir;

/// Throws from training_step at the given step (0-based), once.
class FailingModule : public BoringModule {
 public:
  explicit FailingModule(int64_t fail_at) : fail_at_(fail_at) {}
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    if (train_steps == fail_at_) throw std::runtime_error("the data went bad (test)");
    return BoringModule::training_step(batch, ctx);
  }

 private:
  int64_t fail_at_;
};

void copy_weights(const BoringModule& from, BoringModule& to) {
  at::NoGradGuard no_grad;
  to.layer->weight.copy_(from.layer->weight);
  to.layer->bias.copy_(from.layer->bias);
}

}  // namespace

TEST(OnExceptionCheckpoint, RefusesAnEmptyDirpathOrFilenameAndAFilenameWithAFolder) {
  using volt::testing::error_message;
  EXPECT_TRUE(mentions(error_message<ConfigError>([] { OnExceptionCheckpoint(""); }), {"empty dirpath"}));
  EXPECT_TRUE(mentions(error_message<ConfigError>([] { OnExceptionCheckpoint(".", ""); }), {"filename", "empty"}));
  EXPECT_TRUE(mentions(error_message<ConfigError>([] { OnExceptionCheckpoint(".", "a/b"); }), {"'a/b'", "dirpath"}));
  EXPECT_EQ(OnExceptionCheckpoint("runs").ckpt_path(), "runs/on_exception.ckpt");
  EXPECT_EQ(OnExceptionCheckpoint("runs/", "crash").ckpt_path(), "runs/crash.ckpt");
}

TEST(OnExceptionCheckpoint, AFitThatRaisesLeavesACheckpointThatResumesToTheUninterruptedWeights) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  o.max_epochs = 2;
  auto loader = volt::testing::random_loader(16, 2, 3);  // 8 batches an epoch
  BoringModule uninterrupted;
  FailingModule failing(11);  // epoch 1, batch 3
  copy_weights(uninterrupted, failing);
  volt::Trainer(o).fit(uninterrupted, loader);

  const std::string ckpt = dir / "crash/on_exception.ckpt";
  {
    volt::Trainer trainer(o, {std::make_shared<OnExceptionCheckpoint>(dir / "crash")});
    const std::string msg = volt::testing::error_message<volt::Error>([&] { trainer.fit(failing, loader); });
    EXPECT_TRUE(mentions(msg, {"the data went bad"}));
  }
  ASSERT_TRUE(fs::exists(ckpt));
  const auto saved = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(ckpt);
  EXPECT_EQ(saved.meta["global_step"], 11);
  EXPECT_EQ(saved.meta["epoch"], 1);
  EXPECT_EQ(volt::testing::files_under(dir / "crash"), std::vector<std::string>{"on_exception.ckpt"});

  // The cause fixed: the resumed fit ends where the uninterrupted one did, and the checkpoint goes.
  BoringModule resumed;
  volt::Trainer trainer(o, {std::make_shared<OnExceptionCheckpoint>(dir / "crash")});
  trainer.fit(resumed, loader, nullptr, ckpt);
  EXPECT_EQ(trainer.global_step(), 16);
  EXPECT_EQ(resumed.train_steps, 5);
  volt::testing::expect_bitwise_equal(volt::testing::weights(resumed), volt::testing::weights(uninterrupted));
  EXPECT_FALSE(fs::exists(ckpt));
}

TEST(OnExceptionCheckpoint, WritesNothingWhenFitSucceedsOrValidateRaises) {
  ScratchDir dir;
  auto o = volt::testing::quiet_options(dir.path());
  volt::Trainer trainer(o, {std::make_shared<OnExceptionCheckpoint>(dir / "crash")});
  BoringModule m;
  trainer.fit(m, volt::testing::random_loader(8, 2, 1));
  EXPECT_FALSE(fs::exists(dir / "crash"));
  EXPECT_EQ(trainer.global_step(), 4);

  class FailingValidation : public BoringModule {
   public:
    void validation_step(volt::Batch&, volt::StepContext&) override { throw std::runtime_error("bad val (test)"); }
  } v;
  EXPECT_THROW(trainer.validate(v, volt::testing::random_loader(4, 2, 1)), volt::Error);
  EXPECT_FALSE(fs::exists(dir / "crash"));
}

TEST(OnExceptionCheckpoint, AFailureBeforeTheOptimizersExistWritesNothing) {
  ScratchDir dir;
  class FailingSetup : public BoringModule {
   public:
    void setup(volt::Stage) override { throw std::runtime_error("no data here (test)"); }
  } m;
  volt::Trainer trainer(volt::testing::quiet_options(dir.path()),
                        {std::make_shared<OnExceptionCheckpoint>(dir / "crash")});
  EXPECT_THROW(trainer.fit(m, volt::testing::random_loader(8, 2, 1)), volt::Error);
  EXPECT_FALSE(fs::exists(dir / "crash/on_exception.ckpt"));
}
