// The Trainer as one error boundary: what LibTorch or the standard library throws inside a
// stage leaves as a volt::Error that names the stage, the step and a fix; refused runs
// leave nothing behind; dead writers' temporary files are cleaned up.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ops/full.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <thread>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/trainer/trainer.h"

namespace fs = std::filesystem;
using volt::testing::BoringModule;
using volt::testing::contains;
using volt::testing::error_message;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

namespace {

/// BoringModule with Adam instead of SGD.
class AdamModule : public BoringModule {
 public:
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(1e-3));
  }
};

/// BoringModule whose optimizer gets the learning rate it is given, valid or not.
class LrModule : public BoringModule {
 public:
  explicit LrModule(double lr) : BoringModule(32, 2, lr) {}
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(lr));
  }
};

/// A loader whose labels are all `label` (the model has 2 classes).
std::shared_ptr<volt::data::DataLoader> labels_loader(int64_t label) {
  auto base = volt::testing::random_dataset(16, 1);
  auto x = base->tensors()[0];
  auto y = at::full({16}, label, at::TensorOptions().dtype(at::kLong));
  volt::data::DataLoaderOptions o;
  o.batch_size = 8;
  return std::make_shared<volt::data::DataLoader>(
      std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y}), o);
}

bool has_no_backtrace(const std::string& message) {
  return !contains(message, "Exception raised from") && !contains(message, "INTERNAL ASSERT") &&
         !contains(message, "frame #");
}

}  // namespace

TEST(TrainerErrorBoundary, OptimizerStateThatDoesNotFitIsACheckpointError) {
  ScratchDir dir;
  const std::string ckpt = dir.path() + "/sgd.ckpt";
  {
    volt::Trainer trainer(quiet_options(dir.path()));
    BoringModule sgd;
    trainer.fit(sgd, random_loader(16, 8, 1));
    trainer.save_checkpoint(ckpt);
  }
  volt::Trainer trainer(quiet_options(dir.path()));
  AdamModule adam;
  const std::string msg =
      error_message<volt::CheckpointError>([&] { trainer.fit(adam, random_loader(16, 8, 1), nullptr, ckpt); });
  EXPECT_TRUE(contains(msg, "holds optimizer state that does not fit optimizer 0")) << msg;
  EXPECT_TRUE(contains(msg, "has no 'betas', 'eps', 'amsgrad'")) << msg;
  EXPECT_TRUE(contains(msg, "sgd.ckpt")) << msg;
  EXPECT_TRUE(has_no_backtrace(msg)) << msg;
}

TEST(TrainerErrorBoundary, LabelOutsideTheModelsClassesNamesTheLabelAndTheFix) {
  ScratchDir dir;
  volt::Trainer trainer(quiet_options(dir.path()));
  BoringModule model;  // 2 classes
  const std::string msg = error_message<volt::Error>([&] { trainer.fit(model, labels_loader(12)); });
  EXPECT_TRUE(contains(msg, "fit failed while training")) << msg;
  EXPECT_TRUE(contains(msg, "12")) << msg;
  EXPECT_TRUE(contains(msg, "outside the model's classes")) << msg;
  EXPECT_TRUE(has_no_backtrace(msg)) << msg;
}

TEST(TrainerErrorBoundary, NegativeLearningRateIsAConfigErrorFromConfigureOptimizers) {
  ScratchDir dir;
  volt::Trainer trainer(quiet_options(dir.path()));
  LrModule model(-0.5);
  const std::string msg = error_message<volt::ConfigError>([&] { trainer.fit(model, random_loader(16, 8, 1)); });
  EXPECT_TRUE(contains(msg, "configure_optimizers")) << msg;
  EXPECT_TRUE(contains(msg, "-0.5")) << msg;
  EXPECT_TRUE(contains(msg, "learning rate")) << msg;
}

TEST(TrainerErrorBoundary, ErrorsInTestAndPredictStepsAreVoltErrors) {
  ScratchDir dir;
  volt::Trainer trainer(quiet_options(dir.path()));
  BoringModule model;
  const std::string test_msg = error_message<volt::Error>([&] { trainer.test(model, labels_loader(7)); });
  EXPECT_TRUE(contains(test_msg, "test failed while testing")) << test_msg;
  auto wrong_width = random_loader(8, 4, 1, /*in=*/5);  // the model takes 32 features
  const std::string predict_msg = error_message<volt::Error>([&] { trainer.predict(model, wrong_width); });
  EXPECT_TRUE(contains(predict_msg, "predict failed while predicting")) << predict_msg;
  EXPECT_TRUE(contains(predict_msg, "shape")) << predict_msg;
  EXPECT_TRUE(has_no_backtrace(predict_msg)) << predict_msg;
}

TEST(TrainerErrorBoundary, LibTorchInternalAssertTextIsNeverTheMessage) {
  const auto error = volt::to_volt_error(
      std::make_exception_ptr(c10::Error({"f", "file.cpp", 1}, "t.is_cuda() INTERNAL ASSERT FAILED at \"x.cpp\":1")),
      "fit failed while training");
  const std::string msg = error_message<volt::Error>([&] { std::rethrow_exception(error); });
  EXPECT_FALSE(contains(msg, "INTERNAL ASSERT")) << msg;
  EXPECT_TRUE(contains(msg, "consistency checks")) << msg;
}

TEST(TrainerRefusedRun, CreatesNoLogFolder) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.logger = true;
  o.limit_train_batches = volt::BatchLimit::count(0);
  volt::Trainer trainer(o);
  BoringModule model;
  error_message<volt::ConfigError>([&] { trainer.fit(model, random_loader(16, 8, 1)); });
  EXPECT_FALSE(fs::exists(dir.path() + "/lightning_logs")) << "a refused run left lightning_logs behind";
}

TEST(TrainerRefusedRun, DefaultRootDirThatIsAFileIsAConfigErrorSayingSo) {
  ScratchDir dir;
  const std::string file = dir.path() + "/runs";
  std::ofstream(file) << "x";
  auto o = quiet_options(file);
  const std::string msg = error_message<volt::ConfigError>([&] { volt::Trainer trainer(o); });
  EXPECT_TRUE(contains(msg, "default_root_dir")) << msg;
  EXPECT_TRUE(contains(msg, "is a file, not a folder")) << msg;
}

TEST(TrainerOptionsBounds, NumThreadsAboveFourPerCoreIsRefused) {
  auto o = quiet_options(".");
  o.num_threads = 1000000;
  const std::string msg = error_message<volt::ConfigError>([&] { volt::Trainer trainer(o); });
  EXPECT_TRUE(contains(msg, "num_threads=1000000")) << msg;
}

TEST(TrainerOptionsBounds, InfiniteTimeoutsAndNanClipAreRefused) {
  auto o = quiet_options(".");
  o.rendezvous_timeout_s = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([&] { volt::Trainer trainer(o); }), "rendezvous_timeout_s=inf"));
  o = quiet_options(".");
  o.gradient_clip_val = std::nan("");
  EXPECT_TRUE(contains(error_message<volt::ConfigError>([&] { volt::Trainer trainer(o); }), "gradient_clip_val=nan"));
}

TEST(TrainerCheckpointCleanup, DeadWritersTempFilesAreRemovedWhenFitStarts) {
  ScratchDir dir;
  // A process that exited: its pid is free.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string sub = dir.path() + "/lightning_logs/version_0/checkpoints";
  fs::create_directories(sub);
  const std::string orphan = sub + "/.last.ckpt.tmp." + std::to_string(dead) + ".0";
  const std::string orphan_csv = dir.path() + "/lightning_logs/version_0/.metrics.csv.tmp." + std::to_string(dead);
  const std::string live = sub + "/.best.ckpt.tmp." + std::to_string(::getpid()) + ".3";
  const std::string unrelated = sub + "/notes.tmp.txt";
  for (const auto& f : {orphan, orphan_csv, live, unrelated}) std::ofstream(f) << "partial";
  volt::Trainer trainer(quiet_options(dir.path()));
  BoringModule model;
  trainer.fit(model, random_loader(16, 8, 1));
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_FALSE(fs::exists(orphan_csv));
  EXPECT_TRUE(fs::exists(live)) << "a live writer's file must stay";
  EXPECT_TRUE(fs::exists(unrelated));
}

TEST(TrainerErrorBoundary, TheFullLibTorchReportOnlyWithVoltDebug) {
  const auto c10_error = std::make_exception_ptr(c10::Error({"f", "file.cpp", 7}, "Target 3 is out of bounds."));
  ::unsetenv("VOLT_DEBUG");
  const std::string plain =
      error_message<volt::Error>([&] { std::rethrow_exception(volt::to_volt_error(c10_error, "fit failed")); });
  EXPECT_TRUE(contains(plain, "Set VOLT_DEBUG=1 for the full report")) << plain;
  EXPECT_FALSE(contains(plain, "file.cpp")) << plain;
  EXPECT_EQ(plain.find('\n'), std::string::npos) << "one line: " << plain;
  ::setenv("VOLT_DEBUG", "1", 1);
  const std::string debug =
      error_message<volt::Error>([&] { std::rethrow_exception(volt::to_volt_error(c10_error, "fit failed")); });
  ::unsetenv("VOLT_DEBUG");
  EXPECT_TRUE(contains(debug, "LibTorch's full report")) << debug;
  EXPECT_TRUE(contains(debug, "file.cpp")) << debug;
}
