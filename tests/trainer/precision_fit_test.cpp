// Precision through the Trainer: dtypes of parameters and activations during fit, the
// 16-mixed -> bf16-mixed rule on CPU, plug-in objects, scaler state in checkpoints, and
// (slow) bf16-mixed against 32-true on real Fashion-MNIST.
#include <filesystem>
#include <memory>
#include <string>

#include <ATen/ops/cross_entropy_loss.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/adam.h>

#include "support/boring_module.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/seed.h"
#include "volt/data/idx.h"
#include "volt/precision/mixed_precision.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::ConfigError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Records the dtype of the logits its training step computed.
class DtypeSpy : public BoringModule {
 public:
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    const at::Tensor logits = forward(batch[0]);
    logits_dtype = logits.scalar_type();
    input_dtype = batch[0].scalar_type();
    const at::Tensor loss = at::cross_entropy_loss(logits, batch[1]);
    loss_dtype = loss.scalar_type();
    ctx.log("train_loss", loss);
    return loss;
  }
  at::ScalarType logits_dtype = at::kFloat, input_dtype = at::kFloat, loss_dtype = at::kFloat;
};

TEST(PrecisionFit, SixtyFourTrueTrainsInFloat64) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.precision = "64-true";
  Trainer trainer(o);
  DtypeSpy m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.global_step(), 4);
  for (const auto& p : m.parameters()) EXPECT_EQ(p.scalar_type(), at::kDouble);
  EXPECT_EQ(m.input_dtype, at::kDouble);
  EXPECT_EQ(m.logits_dtype, at::kDouble);
}

TEST(PrecisionFit, HalfTruePrecisionsCastTheWholeModule) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.precision = "bf16-true";
  Trainer trainer(o);
  DtypeSpy m;
  trainer.fit(m, random_loader(16, 4, 1));
  for (const auto& p : m.parameters()) EXPECT_EQ(p.scalar_type(), at::kBFloat16);
  EXPECT_EQ(m.logits_dtype, at::kBFloat16);

  o.precision = "16-true";
  if (!volt::compat::kCpuHalfMatmul) {
    EXPECT_THROW(Trainer{o}, ConfigError) << "LibTorch without float16 CPU matmul must refuse 16-true on CPU";
    return;
  }
  Trainer half(o);
  DtypeSpy h;
  half.fit(h, random_loader(16, 4, 1));
  for (const auto& p : h.parameters()) EXPECT_EQ(p.scalar_type(), at::kHalf);
}

TEST(PrecisionFit, Bf16MixedKeepsFloat32WeightsAndAutocastsTheSteps) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.precision = "bf16-mixed";
  Trainer trainer(o);
  DtypeSpy m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.global_step(), 4);
  for (const auto& p : m.parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
  EXPECT_EQ(m.input_dtype, at::kFloat);
  EXPECT_EQ(m.logits_dtype, at::kBFloat16);
  EXPECT_EQ(m.loss_dtype, at::kFloat) << "cross-entropy must be computed in float32";
  EXPECT_FALSE(volt::compat::autocast_enabled(c10::DeviceType::CPU)) << "autocast must end with the step";
}

TEST(PrecisionFit, SixteenMixedOnCpuRunsAsBf16MixedWithAWarning) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.precision = "16-mixed";
  Trainer trainer(o);
  EXPECT_EQ(trainer.plan().precision, "bf16-mixed");
  ASSERT_FALSE(trainer.plan().warnings.empty());
  EXPECT_NE(trainer.plan().warnings.front().find("bf16-mixed"), std::string::npos);
  EXPECT_EQ(trainer.strategy().precision().name(), "bf16-mixed");
}

TEST(PrecisionFit, PlugInObjectsOneAtATimeAndNotWithTheFlag) {
  ScratchDir dir;
  auto scaled = [] {
    return std::make_shared<volt::precision::MixedPrecision>("16-mixed", c10::DeviceType::CPU, at::kBFloat16,
                                                             std::make_shared<volt::precision::GradScaler>());
  };
  auto o = quiet_options(dir.path());
  try {
    Trainer twice(o, {}, {}, {scaled(), scaled()});
    FAIL() << "two precision plug-ins were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("2 precision plug-ins"), std::string::npos) << e.what();
  }
  o.precision = "bf16-mixed";
  try {
    Trainer both(o, {}, {}, {scaled()});
    FAIL() << "a precision flag and a plug-in were both accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("both given"), std::string::npos) << e.what();
  }
  o.precision = "32-true";
  auto plugin = scaled();
  Trainer trainer(o, {}, {}, {plugin});
  EXPECT_EQ(&trainer.strategy().precision(), plugin.get());
}

TEST(PrecisionFit, ScalerStateTravelsThroughCheckpoints) {
  ScratchDir dir;
  volt::precision::GradScaler::Options so;
  so.init_scale = 1024.0;
  so.growth_interval = 3;
  auto make = [&] {
    return std::make_shared<volt::precision::MixedPrecision>("16-mixed", c10::DeviceType::CPU, at::kBFloat16,
                                                             std::make_shared<volt::precision::GradScaler>(so));
  };
  auto first = make();
  Trainer trainer(quiet_options(dir.path()), {}, {}, {first});
  BoringModule m;
  trainer.fit(m, random_loader(28, 4, 2));  // 7 good steps: 1024 -> 2048 -> 4096, tracker 1
  ASSERT_EQ(first->scaler()->get_scale(), 4096.0);
  const std::string path = dir / "scaled.ckpt";
  trainer.save_checkpoint(path);

  auto second = make();
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  Trainer resumed(o, {}, {}, {second});
  BoringModule m2;
  resumed.fit(m2, random_loader(28, 4, 2), nullptr, path);
  // Restored at 4096 with tracker 1, then 7 more good steps: 4096 -> 8192 -> 16384.
  EXPECT_EQ(second->scaler()->get_scale(), 16384.0);
  EXPECT_EQ(second->scaler()->growth_tracker(), 2);
}

// ---- slow: real data ----

/// The Fashion-MNIST example's CNN, smaller data so both precisions train in seconds.
class SmallCnn : public volt::Module {
 public:
  SmallCnn() {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc_ = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
  }
  at::Tensor forward(const at::Tensor& x) {
    namespace F = torch::nn::functional;
    auto h = F::max_pool2d(F::relu(conv1_->forward(x)), F::MaxPool2dFuncOptions(2));
    h = F::max_pool2d(F::relu(conv2_->forward(h)), F::MaxPool2dFuncOptions(2));
    return fc_->forward(h.flatten(1));
  }
  at::Tensor training_step(volt::Batch& b, volt::StepContext&) override {
    return at::cross_entropy_loss(forward(b[0]), b[1]);
  }
  void test_step(volt::Batch& b, volt::StepContext& ctx) override {
    ctx.log("test_acc", forward(b[0]).argmax(1).eq(b[1]).to(at::kFloat).mean());
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::Adam>(parameters(), torch::optim::AdamOptions(2e-3));
  }
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

double fashion_accuracy(const std::string& precision, const std::string& root) {
  auto train = volt::data::load_mnist_format(volt::data::kFashionMnistDir, true);
  auto test = volt::data::load_mnist_format(volt::data::kFashionMnistDir, false);
  auto subset = std::make_shared<volt::data::Subset>(train, [] {
    std::vector<int64_t> idx(12800);
    for (int64_t i = 0; i < 12800; ++i) idx[i] = i;
    return idx;
  }());
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 64;
  lo.shuffle = true;
  lo.seed = 3;
  volt::data::DataLoaderOptions eo;
  eo.batch_size = 500;
  auto o = quiet_options(root);
  o.precision = precision;
  o.max_epochs = 2;
  o.num_threads = 0;
  volt::seed_everything(11);
  SmallCnn model;
  Trainer trainer(o);
  trainer.fit(model, std::make_shared<volt::data::DataLoader>(subset, lo));
  return trainer.test(model, std::make_shared<volt::data::DataLoader>(test, eo)).at("test_acc");
}

TEST(PrecisionFitSlow, Bf16MixedMatchesFloat32AccuracyOnFashionMnist) {
  if (!std::filesystem::exists(volt::data::kFashionMnistDir)) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << volt::data::kFashionMnistDir << ")";
  }
  ScratchDir dir;
  const double fp32 = fashion_accuracy("32-true", dir.path());
  const double bf16 = fashion_accuracy("bf16-mixed", dir.path());
  std::printf("Fashion-MNIST test accuracy: 32-true %.4f, bf16-mixed %.4f\n", fp32, bf16);
  EXPECT_GT(fp32, 0.80);
  EXPECT_LE(std::abs(fp32 - bf16), 0.01) << "bf16-mixed must be within 1 point of 32-true";
}

}  // namespace
