// Precision plug-ins and the gradient scaler, on CPU: scaler sequences, clipping on
// unscaled gradients, autocast dtypes (with Volt's float32 ops), true-precision casts.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ops/full.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/precision/grad_scaler.h"
#include "volt/precision/mixed_precision.h"
#include "volt/precision/precision_registry.h"
#include "volt/precision/true_precision.h"

namespace {

using volt::precision::ClipAlgorithm;
using volt::precision::GradScaler;
using volt::precision::MixedPrecision;
using volt::precision::TruePrecision;

/// One parameter w (4 values) and an SGD with lr 1: loss = sum(w * c) has gradient c.
struct Toy {
  at::Tensor w = at::zeros({4}).set_requires_grad(true);
  torch::optim::SGD sgd{std::vector<at::Tensor>{w}, torch::optim::SGDOptions(1.0)};
  at::Tensor loss(const at::Tensor& c) const { return (w * c).sum(); }
};

at::Tensor c345() { return at::tensor({3.0f, 4.0f, 0.0f, 0.0f}); }

TEST(GradScaler, ScalesTheLossAndUnscalesGradientsOnce) {
  GradScaler scaler;
  Toy t;
  const at::Tensor scaled = scaler.scale(t.loss(c345()));
  scaled.backward();
  EXPECT_FLOAT_EQ(t.w.grad()[0].item<float>(), 3.0f * 65536.0f);
  scaler.unscale(t.sgd);
  scaler.unscale(t.sgd);  // a second call before the step changes nothing
  EXPECT_TRUE(t.w.grad().equal(c345()));
  EXPECT_FALSE(scaler.found_inf(t.sgd));
}

TEST(GradScaler, GrowsAfterGrowthIntervalGoodSteps) {
  GradScaler::Options o;
  o.init_scale = 8.0;
  o.growth_interval = 3;
  GradScaler scaler(o);
  Toy t;
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) {
    scaler.scale(t.loss(c345())).backward();
    EXPECT_TRUE(scaler.step(t.sgd));
    scaler.update(t.sgd);
    t.w.mutable_grad().reset();
    scales.push_back(scaler.get_scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 16, 16, 16, 32, 32}));
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, InfOrNanSkipsTheStepLeavesParametersAndBacksOff) {
  for (const float bad : {INFINITY, NAN}) {
    GradScaler::Options o;
    o.init_scale = 1024.0;
    o.growth_interval = 2;
    GradScaler scaler(o);
    Toy t;
    scaler.scale(t.loss(c345())).backward();  // one good step: tracker 1
    ASSERT_TRUE(scaler.step(t.sgd));
    scaler.update(t.sgd);
    t.w.mutable_grad().reset();
    const at::Tensor before = t.w.detach().clone();
    scaler.scale(t.loss(at::tensor({1.0f, bad, 0.0f, 0.0f}))).backward();
    EXPECT_FALSE(scaler.step(t.sgd)) << bad;
    EXPECT_TRUE(scaler.found_inf(t.sgd));
    EXPECT_TRUE(t.w.detach().equal(before)) << "a skipped step must leave the parameters untouched";
    scaler.update(t.sgd);
    EXPECT_EQ(scaler.get_scale(), 512.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
  }
}

TEST(GradScaler, StateRoundTripsAndBadOptionsAreRejected) {
  GradScaler::Options o;
  o.init_scale = 256.0;
  o.growth_interval = 5;
  GradScaler a(o);
  Toy t;
  for (int i = 0; i < 3; ++i) {
    a.scale(t.loss(c345())).backward();
    a.step(t.sgd);
    a.update(t.sgd);
    t.w.mutable_grad().reset();
  }
  GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.get_scale(), 256.0);
  EXPECT_EQ(b.growth_tracker(), 3);
  EXPECT_EQ(b.options().growth_interval, 5);
  EXPECT_THROW(b.load_state_dict(nlohmann::json::object()), volt::CheckpointError);
  for (auto edit : std::vector<void (*)(GradScaler::Options&)>{
           [](GradScaler::Options& x) { x.init_scale = 0; }, [](GradScaler::Options& x) { x.growth_factor = 1; },
           [](GradScaler::Options& x) { x.backoff_factor = 1.5; },
           [](GradScaler::Options& x) { x.growth_interval = 0; }}) {
    GradScaler::Options bad;
    edit(bad);
    EXPECT_THROW(GradScaler{bad}, volt::ConfigError);
  }
}

TEST(MixedPrecision, ClipsTheUnscaledGradient) {
  // |c| = 5; scaled by 2^16 the raw gradient norm is 327680. Clipping to 1 must act on the
  // unscaled gradient: after SGD(lr=1) w = -c/5, and the hook sees a norm of exactly 1.
  MixedPrecision precision("16-mixed", c10::DeviceType::CPU, at::kBFloat16, std::make_shared<GradScaler>());
  Toy t;
  precision.pre_backward(t.loss(c345())).backward();
  double norm_in_hook = -1;
  const bool stepped = precision.optimizer_step(t.sgd, [&] {
    precision.clip_gradients(t.sgd, 1.0, ClipAlgorithm::kNorm);
    norm_in_hook = t.w.grad().norm().item<double>();
  });
  EXPECT_TRUE(stepped);
  EXPECT_NEAR(norm_in_hook, 1.0, 1e-5);
  EXPECT_TRUE(t.w.detach().allclose(at::tensor({-0.6f, -0.8f, 0.0f, 0.0f}), 1e-5, 1e-6)) << t.w;
}

TEST(MixedPrecision, ClipByValueAlsoSeesUnscaledGradients) {
  MixedPrecision precision("16-mixed", c10::DeviceType::CPU, at::kBFloat16, std::make_shared<GradScaler>());
  Toy t;
  precision.pre_backward(t.loss(c345())).backward();
  precision.optimizer_step(t.sgd, [&] { precision.clip_gradients(t.sgd, 3.5, ClipAlgorithm::kValue); });
  EXPECT_TRUE(t.w.detach().allclose(at::tensor({-3.0f, -3.5f, 0.0f, 0.0f})));
}

TEST(MixedPrecision, Bf16AutocastOnCpuWithLossesAndSumsInFloat32) {
  MixedPrecision precision("bf16-mixed", c10::DeviceType::CPU, at::kBFloat16);
  const at::Tensor x = at::randn({8, 16});
  const at::Tensor w = at::randn({4, 16});
  {
    auto scope = precision.forward_context();
    EXPECT_TRUE(volt::compat::autocast_enabled(c10::DeviceType::CPU));
    const at::Tensor y = at::linear(x, w);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(at::log_softmax(y, 1).scalar_type(), at::kFloat);
    EXPECT_EQ(at::softmax(y, 1).scalar_type(), at::kFloat);
    EXPECT_EQ(y.sum().scalar_type(), at::kFloat);
    EXPECT_EQ(y.mean().scalar_type(), at::kFloat);
    EXPECT_EQ(y.sum(1).scalar_type(), at::kFloat);
    {
      auto nested = precision.forward_context();
      EXPECT_EQ(at::linear(x, w).scalar_type(), at::kBFloat16);
    }
    EXPECT_TRUE(volt::compat::autocast_enabled(c10::DeviceType::CPU)) << "a nested scope must restore, not disable";
  }
  EXPECT_FALSE(volt::compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::linear(x, w).scalar_type(), at::kFloat);
  // Outside autocast, bfloat16 tensors keep their dtype (the float32 kernels are autocast-only).
  EXPECT_EQ(at::log_softmax(at::randn({2, 3}).to(at::kBFloat16), 1).scalar_type(), at::kBFloat16);
}

TEST(TruePrecision, CastsModuleInputsAndDefaultDtype) {
  for (const auto& [name, dtype] : std::vector<std::pair<std::string, at::ScalarType>>{
           {"64-true", at::kDouble}, {"16-true", at::kHalf}, {"bf16-true", at::kBFloat16}}) {
    auto precision = volt::precision::precision_factory(name)("cpu");
    torch::nn::Linear fc(3, 2);
    precision->convert_module(*fc);
    for (const auto& p : fc->parameters()) EXPECT_EQ(p.scalar_type(), dtype) << name;
    volt::Batch batch{at::ones({2, 3}), at::zeros({2}, at::kLong)};
    precision->convert_input(batch);
    EXPECT_EQ(batch[0].scalar_type(), dtype) << name;
    EXPECT_EQ(batch[1].scalar_type(), at::kLong) << name << ": labels stay integers";
    {
      auto scope = precision->forward_context();
      if (dtype == at::kDouble) {
        EXPECT_EQ(at::ones({1}).scalar_type(), at::kDouble);
      }
    }
    EXPECT_EQ(at::ones({1}).scalar_type(), at::kFloat);
  }
}

TEST(PrecisionRegistry, EveryNameHasAPlugIn) {
  for (const auto& spec : volt::precision::precision_specs()) {
    auto factory = volt::precision::precision_factory(spec.name);
    ASSERT_TRUE(factory) << spec.name;
    EXPECT_EQ(factory(spec.name == "16-mixed" ? "cuda" : "cpu")->name(), spec.name);
  }
  EXPECT_THROW(volt::precision::precision_factory("bf16-mixed")("tpu"), volt::NotSupportedError);
}

}  // namespace
