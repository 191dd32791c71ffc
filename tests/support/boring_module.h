#pragma once
// Lightning's BoringModel for Volt's end-to-end tests: a Linear(32, 2) classifier that
// logs its losses and records every hook the Trainer calls, plus random data and the
// quiet, per-test Trainer options the tests start from.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "volt/callbacks/callback.h"
#include "volt/core/module.h"
#include "volt/core/trainer_options.h"
#include "volt/data/dataloader.h"
#include "volt/data/dataset.h"

namespace volt::testing {

/// "fit", "validate", "test", "predict".
inline std::string stage_name(Stage stage) {
  return to_string(stage);
}

/// A Linear(in, out) classifier with cross-entropy loss (Lightning's BoringModel).
/// training_step logs "train_loss" (on_step), validation_step "val_loss", test_step
/// "test_loss"; predict_step returns the logits. SGD with `lr`. Every hook appends its
/// name to `calls` (setup/teardown as "setup(fit)", "teardown(fit)").
class BoringModule : public Module {
 public:
  explicit BoringModule(int64_t in = 32, int64_t out = 2, double lr = 0.1) : lr(lr) {
    layer = register_module("layer", torch::nn::Linear(in, out));
  }

  torch::nn::Linear layer{nullptr};
  double lr;

  /// Every hook in call order.
  std::vector<std::string> calls;
  /// Steps run, per stage (sanity-check steps are counted apart from validation).
  int64_t train_steps = 0;
  int64_t val_steps = 0;
  int64_t sanity_steps = 0;
  int64_t test_steps = 0;
  int64_t predict_steps = 0;
  /// Set when an evaluation step ran in training mode or with grad enabled.
  bool eval_step_saw_training = false;
  bool eval_step_saw_grad = false;
  /// Set when a training step ran in eval mode or without grad.
  bool train_step_saw_eval = false;
  bool train_step_saw_no_grad = false;

  at::Tensor forward(const at::Tensor& x) { return layer->forward(x); }

  at::Tensor loss_of(Batch& batch) { return torch::nn::functional::cross_entropy(forward(batch[0]), batch[1]); }

  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    calls.push_back("training_step");
    ++train_steps;
    if (!is_training()) train_step_saw_eval = true;
    if (!at::GradMode::is_enabled()) train_step_saw_no_grad = true;
    at::Tensor loss = loss_of(batch);
    ctx.log("train_loss", loss);
    return loss;
  }
  void validation_step(Batch& batch, StepContext& ctx) override {
    calls.push_back("validation_step");
    if (ctx.stage() == RunningStage::kSanityChecking) {
      ++sanity_steps;
    } else {
      ++val_steps;
    }
    note_eval_mode();
    ctx.log("val_loss", loss_of(batch));
  }
  void test_step(Batch& batch, StepContext& ctx) override {
    calls.push_back("test_step");
    ++test_steps;
    note_eval_mode();
    ctx.log("test_loss", loss_of(batch));
  }
  at::Tensor predict_step(Batch& batch, StepContext&) override {
    calls.push_back("predict_step");
    ++predict_steps;
    note_eval_mode();
    return forward(batch[0]);
  }
  OptimizerConfig configure_optimizers() override {
    calls.push_back("configure_optimizers");
    return std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(lr));
  }

  void configure_model() override { calls.push_back("configure_model"); }
  void setup(Stage stage) override { calls.push_back("setup(" + stage_name(stage) + ")"); }
  void teardown(Stage stage) override { calls.push_back("teardown(" + stage_name(stage) + ")"); }

  void on_fit_start() override { calls.push_back("on_fit_start"); }
  void on_fit_end() override { calls.push_back("on_fit_end"); }
  void on_train_start() override { calls.push_back("on_train_start"); }
  void on_train_end() override { calls.push_back("on_train_end"); }
  void on_validation_start() override { calls.push_back("on_validation_start"); }
  void on_validation_end() override { calls.push_back("on_validation_end"); }
  void on_test_start() override { calls.push_back("on_test_start"); }
  void on_test_end() override { calls.push_back("on_test_end"); }
  void on_predict_start() override { calls.push_back("on_predict_start"); }
  void on_predict_end() override { calls.push_back("on_predict_end"); }

  void on_train_epoch_start() override { calls.push_back("on_train_epoch_start"); }
  void on_train_epoch_end() override { calls.push_back("on_train_epoch_end"); }
  void on_validation_epoch_start() override { calls.push_back("on_validation_epoch_start"); }
  void on_validation_epoch_end() override { calls.push_back("on_validation_epoch_end"); }
  void on_test_epoch_start() override { calls.push_back("on_test_epoch_start"); }
  void on_test_epoch_end() override { calls.push_back("on_test_epoch_end"); }
  void on_predict_epoch_start() override { calls.push_back("on_predict_epoch_start"); }
  void on_predict_epoch_end() override { calls.push_back("on_predict_epoch_end"); }

  bool on_train_batch_start(Batch&, int64_t) override {
    calls.push_back("on_train_batch_start");
    return true;
  }
  void on_train_batch_end(const at::Tensor&, Batch&, int64_t) override { calls.push_back("on_train_batch_end"); }
  void on_validation_batch_start(Batch&, int64_t) override { calls.push_back("on_validation_batch_start"); }
  void on_validation_batch_end(Batch&, int64_t) override { calls.push_back("on_validation_batch_end"); }
  void on_test_batch_start(Batch&, int64_t) override { calls.push_back("on_test_batch_start"); }
  void on_test_batch_end(Batch&, int64_t) override { calls.push_back("on_test_batch_end"); }

  void on_before_backward(const at::Tensor&) override { calls.push_back("on_before_backward"); }
  void on_after_backward() override { calls.push_back("on_after_backward"); }
  void on_before_optimizer_step(torch::optim::Optimizer&, size_t) override {
    calls.push_back("on_before_optimizer_step");
  }
  void on_before_zero_grad(torch::optim::Optimizer&) override { calls.push_back("on_before_zero_grad"); }

 private:
  void note_eval_mode() {
    if (is_training()) eval_step_saw_training = true;
    if (at::GradMode::is_enabled()) eval_step_saw_grad = true;
  }
};

/// Records where each validation run starts and how the run is going, from a callback's
/// view of the state (a Module's hooks do not see it).
class ValidationSpy : public callbacks::Callback {
 public:
  struct Start {
    int64_t epoch;
    int64_t global_step;
    int64_t batches_done;
  };
  /// Validation runs during fit (sanity check excluded), in order.
  std::vector<Start> starts;
  /// Sanity-check runs.
  int64_t sanity_runs = 0;

  std::string state_key() const override { return "ValidationSpy"; }
  void on_validation_start(TrainerView& view) override {
    const TrainerState& s = view.state();
    if (s.sanity_checking) {
      ++sanity_runs;
      return;
    }
    starts.push_back({s.current_epoch, s.global_step, s.batches_done});
  }
};

/// Random inputs [n, in] (standard normal) and int64 targets [n] in {0, 1}, from a
/// generator of their own (the global one is left alone).
inline std::shared_ptr<data::TensorDataset> random_dataset(int64_t n, uint64_t seed, int64_t in = 32) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor x = at::randn({n, in}, gen);
  at::Tensor y = at::randint(2, {n}, gen, at::TensorOptions().dtype(at::kLong));
  return std::make_shared<data::TensorDataset>(std::vector<at::Tensor>{x, y});
}

/// A DataLoader over random_dataset(n, seed), in order (no shuffle).
inline std::shared_ptr<data::DataLoader> random_loader(int64_t n, int64_t batch, uint64_t seed, int64_t in = 32) {
  data::DataLoaderOptions o;
  o.batch_size = batch;
  return std::make_shared<data::DataLoader>(random_dataset(n, seed, in), o);
}

/// A TempDir named after the running test (easier to trace when one is left behind).
class ScratchDir : public TempDir {
 public:
  ScratchDir() : TempDir(test_prefix()), path_(str()) {}
  const std::string& path() const { return path_; }

 private:
  static std::string test_prefix() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("volt_trainer_") + info->test_suite_name() + "_" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    return name;
  }
  std::string path_;
};

/// Options for a quiet test run under `root`: no progress bar, summary, logger or
/// checkpoints, no sanity check, one epoch.
inline TrainerOptions quiet_options(const std::string& root) {
  TrainerOptions o;
  o.enable_progress_bar = false;
  o.enable_model_summary = false;
  o.logger = false;
  o.enable_checkpointing = false;
  o.num_sanity_val_steps = 0;
  o.max_epochs = 1;
  o.default_root_dir = root;
  o.accelerator = "cpu";
  o.devices = "1";
  o.num_threads = 1;
  return o;
}

/// Every regular file under `dir`, relative to it, sorted.
inline std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Copies of a module's parameters, in order (to compare runs).
inline std::vector<at::Tensor> weights(const Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

/// Every parameter of `a` equals `b`'s bit for bit.
inline void expect_bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << "parameter " << i << " differs";
}

}  // namespace volt::testing
