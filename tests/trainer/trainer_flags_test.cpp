// End-to-end runs that pin down what each Trainer flag does to the loops: how long a fit
// runs, how many batches each stage sees, when validation runs, the sanity check,
// gradient accumulation and clipping. Every expectation is an exact count or value.
#include <gtest/gtest.h>

#include <ATen/ops/allclose.h>
#include <ATen/ops/tensor.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::BatchLimit;
using volt::ConfigError;
using volt::Trainer;
using volt::TrainerOptions;
using volt::TrainerView;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_dataset;
using volt::testing::random_loader;
using volt::testing::ScratchDir;
using volt::testing::ValidationSpy;

/// Calls request_stop from on_train_batch_end whenever `when` says so.
class StopRequester : public volt::callbacks::Callback {
 public:
  explicit StopRequester(std::function<bool(const volt::TrainerState&)> when) : when_(std::move(when)) {}
  std::string state_key() const override { return "StopRequester"; }
  void on_train_batch_end(TrainerView& view, const at::Tensor&, const volt::Batch&, int64_t) override {
    if (when_(view.state())) {
      ++requests;
      view.request_stop("test asked to stop");
    }
  }
  int64_t requests = 0;

 private:
  std::function<bool(const volt::TrainerState&)> when_;
};

// --- how long: max/min epochs and steps ---

TEST(TrainerFlags, MaxEpochsRunsExactlyThatManyEpochs) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));  // 4 batches an epoch
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(trainer.global_step(), 12);
  EXPECT_EQ(m.train_steps, 12);
}

// Lightning 2.x keeps trainer.should_stop set when min_epochs is not reached and stops as
// soon as it is (_TrainingEpochLoop.done / _FitLoop.done with _can_stop_early). A single
// request at epoch 0 with min_epochs=3 therefore trains exactly 3 epochs.
// Volt does the same.
TEST(TrainerFlags, MinEpochsDefersAnEarlyStopRequestUntilReached) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  o.min_epochs = 3;
  auto stopper = std::make_shared<StopRequester>(
      [](const volt::TrainerState& s) { return s.current_epoch == 0 && s.batch_idx == 0; });
  Trainer trainer(o, {stopper});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(stopper->requests, 1);
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(m.train_steps, 12);
}

TEST(TrainerFlags, StopRequestedEveryBatchEndsAtMinEpochs) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  o.min_epochs = 3;
  auto stopper = std::make_shared<StopRequester>([](const volt::TrainerState&) { return true; });
  Trainer trainer(o, {stopper});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(m.train_steps, 12);
}

TEST(TrainerFlags, StopRequestWithoutMinimumEndsTheEpochAtThatBatch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  auto stopper = std::make_shared<StopRequester>(
      [](const volt::TrainerState& s) { return s.current_epoch == 1 && s.batch_idx == 1; });
  Trainer trainer(o, {stopper});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(m.train_steps, 6);  // epoch 0 (4) + batches 0, 1 of epoch 1
  EXPECT_EQ(trainer.global_step(), 6);
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_TRUE(trainer.should_stop());
  EXPECT_EQ(trainer.state().stop_reason, "test asked to stop");
}

TEST(TrainerFlags, MaxStepsStopsMidEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 5;
  o.max_steps = 5;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1));  // 8 batches an epoch
  EXPECT_EQ(trainer.global_step(), 5);
  EXPECT_EQ(m.train_steps, 5);
  // The cut-short epoch counts as completed (Lightning increments current_epoch too).
  EXPECT_EQ(trainer.current_epoch(), 1);
}

// As in Lightning 2.x (_should_check_val_fx): reaching max_steps is no reason to validate,
// so an epoch that max_steps cuts short before its validation point has no validation.
TEST(TrainerFlags, MaxStepsMidEpochDoesNotValidateAtTheCut) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 5;
  o.max_steps = 5;
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(8, 4, 2));
  EXPECT_TRUE(spy->starts.empty());
  EXPECT_EQ(m.val_steps, 0);
  EXPECT_EQ(trainer.global_step(), 5);
}

TEST(TrainerFlags, MaxStepsCountsOptimizerStepsNotBatchesWithAccumulation) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 5;
  o.max_steps = 3;
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1));
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_EQ(m.train_steps, 6);
}

TEST(TrainerFlags, MinStepsDefersAStopRequestUntilReached) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  o.min_steps = 6;
  auto stopper = std::make_shared<StopRequester>([](const volt::TrainerState&) { return true; });
  Trainer trainer(o, {stopper});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));  // 4 batches an epoch
  EXPECT_EQ(trainer.global_step(), 6);
  EXPECT_EQ(m.train_steps, 6);
  EXPECT_EQ(trainer.current_epoch(), 2);
}

TEST(TrainerFlags, DefaultMaxEpochsWithMaxStepsRunsUntilMaxSteps) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = -1;
  o.max_steps = 10;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1));
  EXPECT_EQ(trainer.global_step(), 10);
  EXPECT_EQ(m.train_steps, 10);
  EXPECT_EQ(trainer.current_epoch(), 3);  // 2 full epochs + the one max_steps cut short
  EXPECT_EQ(trainer.state().max_epochs, -1);
}

TEST(TrainerFlags, DefaultMaxEpochsWithoutMaxStepsIs1000) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = -1;
  auto stopper = std::make_shared<StopRequester>([](const volt::TrainerState&) { return true; });
  Trainer trainer(o, {stopper});
  BoringModule m;
  trainer.fit(m, random_loader(8, 4, 1));
  EXPECT_EQ(trainer.state().max_epochs, 1000);
  EXPECT_EQ(m.train_steps, 1);
}

// --- limit_*_batches ---

TEST(TrainerFlags, LimitTrainBatchesAsCountAndAsFraction) {
  ScratchDir dir;
  {
    auto o = quiet_options(dir.path());
    o.max_epochs = 2;
    o.limit_train_batches = BatchLimit::count(3);
    Trainer trainer(o);
    BoringModule m;
    trainer.fit(m, random_loader(32, 4, 1));  // 8 batches
    EXPECT_EQ(m.train_steps, 6);
    EXPECT_EQ(trainer.state().num_training_batches, 3);
  }
  {
    auto o = quiet_options(dir.path());
    o.max_epochs = 2;
    o.limit_train_batches = BatchLimit::fraction(0.25);
    Trainer trainer(o);
    BoringModule m;
    trainer.fit(m, random_loader(32, 4, 1));
    EXPECT_EQ(m.train_steps, 4);
    EXPECT_EQ(trainer.global_step(), 4);
  }
  {
    // int(0.3 * 8) = 2, truncated as Lightning does.
    auto o = quiet_options(dir.path());
    o.limit_train_batches = BatchLimit::fraction(0.3);
    Trainer trainer(o);
    BoringModule m;
    trainer.fit(m, random_loader(32, 4, 1));
    EXPECT_EQ(m.train_steps, 2);
  }
}

TEST(TrainerFlags, LimitTrainBatchesZeroIsAConfigErrorAtFit) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.limit_train_batches = BatchLimit::count(0);
  Trainer trainer(o);
  BoringModule m;
  try {
    trainer.fit(m, random_loader(16, 4, 1));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("limit_train_batches=0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.train_steps, 0);
}

TEST(TrainerFlags, LimitValBatchesAsCountAndAsFraction) {
  ScratchDir dir;
  for (const auto& [limit, expected] :
       std::vector<std::pair<BatchLimit, int64_t>>{{BatchLimit::count(2), 2},
                                                   {BatchLimit::count(10), 4},
                                                   {BatchLimit::fraction(0.5), 2},
                                                   {BatchLimit::fraction(0.8), 3},
                                                   {BatchLimit::fraction(1.0), 4}}) {
    auto o = quiet_options(dir.path());
    o.max_epochs = 2;
    o.limit_val_batches = limit;
    Trainer trainer(o);
    BoringModule m;
    trainer.fit(m, random_loader(16, 4, 1), random_loader(16, 4, 2));  // 4 val batches
    EXPECT_EQ(m.val_steps, 2 * expected) << limit.to_string();
    EXPECT_EQ(trainer.state().num_val_batches, expected) << limit.to_string();
  }
}

TEST(TrainerFlags, LimitValBatchesZeroDisablesValidationAndSanityCheck) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  o.num_sanity_val_steps = 2;
  o.limit_val_batches = BatchLimit::count(0);
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1), random_loader(16, 4, 2));
  EXPECT_EQ(m.val_steps, 0);
  EXPECT_EQ(m.sanity_steps, 0);
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "on_validation_start"), 0);
  EXPECT_EQ(m.train_steps, 8);
}

TEST(TrainerFlags, LimitTestAndPredictBatchesAsCountAndAsFraction) {
  ScratchDir dir;
  auto loader = random_loader(40, 4, 3);  // 10 batches
  {
    auto o = quiet_options(dir.path());
    o.limit_test_batches = BatchLimit::count(3);
    o.limit_predict_batches = BatchLimit::count(4);
    Trainer trainer(o);
    BoringModule m;
    trainer.test(m, loader);
    EXPECT_EQ(m.test_steps, 3);
    EXPECT_EQ(trainer.predict(m, loader).size(), 4u);
    EXPECT_EQ(m.predict_steps, 4);
  }
  {
    auto o = quiet_options(dir.path());
    o.limit_test_batches = BatchLimit::fraction(0.5);
    o.limit_predict_batches = BatchLimit::fraction(0.2);
    Trainer trainer(o);
    BoringModule m;
    trainer.test(m, loader);
    EXPECT_EQ(m.test_steps, 5);
    EXPECT_EQ(trainer.predict(m, loader).size(), 2u);
  }
  {
    auto o = quiet_options(dir.path());
    o.limit_val_batches = BatchLimit::fraction(0.7);
    Trainer trainer(o);
    BoringModule m;
    trainer.validate(m, loader);
    EXPECT_EQ(m.val_steps, 7);
  }
}

// --- when validation runs ---

TEST(TrainerFlags, ValCheckIntervalFractionValidatesFourTimesAnEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  o.val_check_interval = BatchLimit::fraction(0.25);
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(8, 4, 2));  // 8 train, 2 val batches
  ASSERT_EQ(spy->starts.size(), 8u);
  const std::vector<int64_t> steps = {2, 4, 6, 8, 10, 12, 14, 16};
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(spy->starts[i].global_step, steps[i]) << "validation " << i;
    EXPECT_EQ(spy->starts[i].epoch, static_cast<int64_t>(i / 4)) << "validation " << i;
  }
  EXPECT_EQ(m.val_steps, 16);
}

TEST(TrainerFlags, ValCheckIntervalCountValidatesEveryNBatchesWithinTheEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  o.val_check_interval = BatchLimit::count(3);
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(8, 4, 2));  // 8 train batches
  // After batches 3 and 6 of each epoch; not at the epoch's end (8 % 3 != 0), as Lightning.
  ASSERT_EQ(spy->starts.size(), 4u);
  EXPECT_EQ(spy->starts[0].batches_done, 3);
  EXPECT_EQ(spy->starts[1].batches_done, 6);
  EXPECT_EQ(spy->starts[2].batches_done, 3);
  EXPECT_EQ(spy->starts[3].batches_done, 6);
  EXPECT_EQ(spy->starts[2].epoch, 1);
}

TEST(TrainerFlags, CheckValEveryNEpochsValidatesOnlyOnOddEpochIndices) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 4;
  o.check_val_every_n_epoch = 2;
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
  ASSERT_EQ(spy->starts.size(), 2u);
  EXPECT_EQ(spy->starts[0].epoch, 1);
  EXPECT_EQ(spy->starts[1].epoch, 3);
  EXPECT_EQ(m.val_steps, 4);
}

TEST(TrainerFlags, ValCheckIntervalCountsAcrossEpochsWhenCheckValEveryNEpochIsUnset) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  o.check_val_every_n_epoch = std::nullopt;
  o.val_check_interval = BatchLimit::count(3);
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));  // 4 batches an epoch
  // After training batches 3, 6, 9, 12 counted over the whole fit.
  ASSERT_EQ(spy->starts.size(), 4u);
  const std::vector<int64_t> steps = {3, 6, 9, 12};
  const std::vector<int64_t> epochs = {0, 1, 2, 2};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(spy->starts[i].global_step, steps[i]) << i;
    EXPECT_EQ(spy->starts[i].epoch, epochs[i]) << i;
  }
}

TEST(TrainerFlags, ValCheckIntervalLongerThanTheEpochIsAConfigErrorAtFitStart) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.val_check_interval = BatchLimit::count(10);
  Trainer trainer(o);  // the epoch length is only known at fit
  BoringModule m;
  try {
    trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("val_check_interval=10"), std::string::npos) << what;
    EXPECT_NE(what.find("4 training batches"), std::string::npos) << what;
  }
  EXPECT_EQ(m.train_steps, 0);
}

// --- the sanity check ---

TEST(TrainerFlags, NumSanityValStepsRunsThatManyBatchesBeforeTraining) {
  ScratchDir dir;
  for (const auto& [steps, expected] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {0, 0}, {-1, 4}, {9, 4}}) {
    auto o = quiet_options(dir.path());
    o.num_sanity_val_steps = steps;
    auto spy = std::make_shared<ValidationSpy>();
    Trainer trainer(o, {spy});
    BoringModule m;
    trainer.fit(m, random_loader(8, 4, 1), random_loader(16, 4, 2));  // 4 val batches
    EXPECT_EQ(m.sanity_steps, expected) << "num_sanity_val_steps=" << steps;
    EXPECT_EQ(spy->sanity_runs, expected > 0 ? 1 : 0) << "num_sanity_val_steps=" << steps;
    EXPECT_EQ(m.val_steps, 4) << "num_sanity_val_steps=" << steps;
    if (expected > 0) {
      // The sanity check comes before the first training step.
      const auto first_val = std::find(m.calls.begin(), m.calls.end(), "validation_step");
      const auto first_train = std::find(m.calls.begin(), m.calls.end(), "training_step");
      EXPECT_LT(first_val - m.calls.begin(), first_train - m.calls.begin());
    }
  }
}

/// Looks at callback_metrics around the sanity check.
class SanityMetricsSpy : public volt::callbacks::Callback {
 public:
  std::string state_key() const override { return "SanityMetricsSpy"; }
  void on_sanity_check_end(TrainerView& view) override { at_sanity_end = view.callback_metrics(); }
  void on_train_start(TrainerView& view) override { at_train_start = view.callback_metrics(); }
  volt::MetricMap at_sanity_end;
  volt::MetricMap at_train_start;
};

TEST(TrainerFlags, SanityCheckMetricsAreNotKeptInCallbackMetrics) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.num_sanity_val_steps = 2;
  auto spy = std::make_shared<SanityMetricsSpy>();
  Trainer trainer(o, {spy});
  BoringModule m;
  trainer.fit(m, random_loader(8, 4, 1), random_loader(16, 4, 2));
  EXPECT_EQ(spy->at_sanity_end.count("val_loss"), 1u);
  EXPECT_TRUE(spy->at_train_start.empty());
  EXPECT_EQ(trainer.callback_metrics().count("val_loss"), 1u);  // the real validation's
}

// --- gradient accumulation ---

/// The BoringModule's optimisation by hand: loss / accumulate summed over each group of
/// `accumulate` batches (the last group may be shorter), then one SGD step.
at::Tensor hand_trained_weight(const BoringModule& start, int64_t n, int64_t batch, uint64_t seed, int64_t accumulate,
                               int64_t epochs) {
  torch::nn::Linear ref(32, 2);
  {
    at::NoGradGuard no_grad;
    ref->weight.copy_(start.layer->weight);
    ref->bias.copy_(start.layer->bias);
  }
  torch::optim::SGD opt(ref->parameters(), torch::optim::SGDOptions(0.1));
  auto ds = random_dataset(n, seed);
  const auto& x = ds->tensors()[0];
  const auto& y = ds->tensors()[1];
  const int64_t batches = (n + batch - 1) / batch;
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t i = 0; i < batches; ++i) {
      auto xb = x.slice(0, i * batch, std::min(n, (i + 1) * batch));
      auto yb = y.slice(0, i * batch, std::min(n, (i + 1) * batch));
      auto loss = torch::nn::functional::cross_entropy(ref->forward(xb), yb) / static_cast<double>(accumulate);
      loss.backward();
      if ((i + 1) % accumulate == 0 || i + 1 == batches) {
        opt.step();
        opt.zero_grad();
      }
    }
  }
  return ref->weight.detach().clone();
}

TEST(TrainerFlags, AccumulateGradBatchesStepsOncePerGroupLikeAHandLoop) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.accumulate_grad_batches = 4;
  Trainer trainer(o);
  BoringModule m;
  BoringModule start;
  {
    at::NoGradGuard no_grad;
    start.layer->weight.copy_(m.layer->weight);
    start.layer->bias.copy_(m.layer->bias);
  }
  trainer.fit(m, random_loader(32, 4, 5));  // 8 batches
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(m.train_steps, 8);
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "on_before_optimizer_step"), 2);
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "on_before_backward"), 8);
  const at::Tensor expected = hand_trained_weight(start, 32, 4, 5, 4, 1);
  EXPECT_TRUE(at::allclose(m.layer->weight, expected, 0.0, 1e-6));
  // And not the same as stepping every batch.
  const at::Tensor every_batch = hand_trained_weight(start, 32, 4, 5, 1, 1);
  EXPECT_FALSE(at::allclose(m.layer->weight, every_batch, 0.0, 1e-4));
}

TEST(TrainerFlags, AccumulateGradBatchesStepsTheLastPartialGroupAtEpochEnd) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.accumulate_grad_batches = 4;
  o.max_epochs = 2;
  Trainer trainer(o);
  BoringModule m;
  BoringModule start;
  {
    at::NoGradGuard no_grad;
    start.layer->weight.copy_(m.layer->weight);
    start.layer->bias.copy_(m.layer->bias);
  }
  trainer.fit(m, random_loader(40, 4, 6));  // 10 batches: groups of 4, 4, 2
  EXPECT_EQ(trainer.global_step(), 6);
  const at::Tensor expected = hand_trained_weight(start, 40, 4, 6, 4, 2);
  EXPECT_TRUE(at::allclose(m.layer->weight, expected, 0.0, 1e-6));
}

// --- gradient clipping ---

/// w: Linear(2, 1) without bias, starting at zero; loss = sum(w . x) with x = (3, 4), so
/// the gradient is (3, 4) with norm 5. SGD with lr 1: the step is minus the (clipped) gradient.
class ClipModule : public volt::Module {
 public:
  ClipModule() {
    layer = register_module("layer", torch::nn::Linear(torch::nn::LinearOptions(2, 1).bias(false)));
    at::NoGradGuard no_grad;
    layer->weight.zero_();
  }
  torch::nn::Linear layer{nullptr};
  double grad_norm_before_optimizer_step = -1;

  at::Tensor training_step(volt::Batch& batch, volt::StepContext&) override {
    return layer->forward(batch[0]).sum();
  }
  volt::OptimizerConfig configure_optimizers() override {
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(1.0));
  }
  void on_before_optimizer_step(torch::optim::Optimizer&, size_t) override {
    grad_norm_before_optimizer_step = layer->weight.grad().norm().item<double>();
  }
};

/// The gradient as the optimizer used it: read at on_before_zero_grad, after the step.
class GradientSpy : public volt::callbacks::Callback {
 public:
  explicit GradientSpy(const ClipModule& m) : m_(m) {}
  std::string state_key() const override { return "GradientSpy"; }
  void on_before_zero_grad(TrainerView&, torch::optim::Optimizer&) override {
    grad = m_.layer->weight.grad().detach().clone();
  }
  at::Tensor grad;

 private:
  const ClipModule& m_;
};

std::shared_ptr<volt::data::DataLoader> clip_loader() {
  auto x = at::tensor({3.0f, 4.0f}).reshape({1, 2});
  auto ds = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x});
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 1;
  return std::make_shared<volt::data::DataLoader>(ds, lo);
}

struct ClipResult {
  at::Tensor weight;
  at::Tensor grad;
  double norm_seen_by_module;
};

ClipResult run_clip(const std::string& root, double value, const std::string& algorithm) {
  auto o = quiet_options(root);
  o.gradient_clip_val = value;
  o.gradient_clip_algorithm = algorithm;
  ClipModule m;
  auto spy = std::make_shared<GradientSpy>(m);
  Trainer trainer(o, {spy});
  trainer.fit(m, clip_loader());
  return {m.layer->weight.detach().clone().reshape({2}), spy->grad.reshape({2}), m.grad_norm_before_optimizer_step};
}

TEST(TrainerFlags, GradientClipByNormScalesTheGradientToTheClipValue) {
  ScratchDir dir;
  const auto r = run_clip(dir.path(), 1.0, "norm");
  EXPECT_NEAR(r.grad.norm().item<double>(), 1.0, 1e-5);
  EXPECT_TRUE(at::allclose(r.weight, at::tensor({-0.6f, -0.8f}), 0.0, 1e-5)) << r.weight;
  // Clipping happens after on_before_optimizer_step (Lightning's order).
  EXPECT_NEAR(r.norm_seen_by_module, 5.0, 1e-5);
}

TEST(TrainerFlags, GradientClipByNormLeavesASmallerGradientAlone) {
  ScratchDir dir;
  const auto r = run_clip(dir.path(), 10.0, "norm");
  EXPECT_TRUE(at::allclose(r.weight, at::tensor({-3.0f, -4.0f}), 0.0, 1e-5)) << r.weight;
}

TEST(TrainerFlags, GradientClipByValueClampsEachElement) {
  ScratchDir dir;
  const auto r = run_clip(dir.path(), 3.5, "value");
  EXPECT_TRUE(at::allclose(r.grad, at::tensor({3.0f, 3.5f}), 0.0, 1e-6)) << r.grad;
  EXPECT_TRUE(at::allclose(r.weight, at::tensor({-3.0f, -3.5f}), 0.0, 1e-6)) << r.weight;
}

TEST(TrainerFlags, NoGradientClipByDefault) {
  ScratchDir dir;
  const auto r = run_clip(dir.path(), 0.0, "norm");
  EXPECT_TRUE(at::allclose(r.weight, at::tensor({-3.0f, -4.0f}), 0.0, 1e-6)) << r.weight;
}

}  // namespace
