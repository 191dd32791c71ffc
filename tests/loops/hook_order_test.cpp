// The loops end to end, part 1: the order of every hook in a fit, the sanity check,
// validate/test/predict, what they return and the mode they run in.
#include "loops/loops_support.h"

namespace {

// --- hook order ---

/// Appends "cb:<hook>" to the same list the module records into.
class RecordingCallback : public volt::callbacks::Callback {
 public:
  explicit RecordingCallback(std::vector<std::string>& calls) : calls_(calls) {}
  std::string state_key() const override { return "RecordingCallback"; }
  void setup(TrainerView&, volt::Stage s) override { add("setup(" + std::string(volt::to_string(s)) + ")"); }
  void teardown(TrainerView&, volt::Stage s) override { add("teardown(" + std::string(volt::to_string(s)) + ")"); }
  void on_fit_start(TrainerView&) override { add("on_fit_start"); }
  void on_fit_end(TrainerView&) override { add("on_fit_end"); }
  void on_sanity_check_start(TrainerView&) override { add("on_sanity_check_start"); }
  void on_sanity_check_end(TrainerView&) override { add("on_sanity_check_end"); }
  void on_train_start(TrainerView&) override { add("on_train_start"); }
  void on_train_end(TrainerView&) override { add("on_train_end"); }
  void on_train_epoch_start(TrainerView&) override { add("on_train_epoch_start"); }
  void on_train_epoch_end(TrainerView&) override { add("on_train_epoch_end"); }
  void on_train_batch_start(TrainerView&, const Batch&, int64_t) override { add("on_train_batch_start"); }
  void on_train_batch_end(TrainerView&, const at::Tensor&, const Batch&, int64_t) override {
    add("on_train_batch_end");
  }
  void on_validation_start(TrainerView&) override { add("on_validation_start"); }
  void on_validation_end(TrainerView&) override { add("on_validation_end"); }
  void on_validation_epoch_start(TrainerView&) override { add("on_validation_epoch_start"); }
  void on_validation_epoch_end(TrainerView&) override { add("on_validation_epoch_end"); }
  void on_validation_batch_start(TrainerView&, const Batch&, int64_t) override { add("on_validation_batch_start"); }
  void on_validation_batch_end(TrainerView&, const Batch&, int64_t) override { add("on_validation_batch_end"); }
  void on_test_start(TrainerView&) override { add("on_test_start"); }
  void on_test_end(TrainerView&) override { add("on_test_end"); }
  void on_test_epoch_start(TrainerView&) override { add("on_test_epoch_start"); }
  void on_test_epoch_end(TrainerView&) override { add("on_test_epoch_end"); }
  void on_test_batch_start(TrainerView&, const Batch&, int64_t) override { add("on_test_batch_start"); }
  void on_test_batch_end(TrainerView&, const Batch&, int64_t) override { add("on_test_batch_end"); }
  void on_predict_start(TrainerView&) override { add("on_predict_start"); }
  void on_predict_end(TrainerView&) override { add("on_predict_end"); }
  void on_predict_batch_start(TrainerView&, const Batch&, int64_t) override { add("on_predict_batch_start"); }
  void on_predict_batch_end(TrainerView&, const Batch&, int64_t) override { add("on_predict_batch_end"); }
  void on_before_backward(TrainerView&, const at::Tensor&) override { add("on_before_backward"); }
  void on_after_backward(TrainerView&) override { add("on_after_backward"); }
  void on_before_optimizer_step(TrainerView&, torch::optim::Optimizer&, size_t) override {
    add("on_before_optimizer_step");
  }
  void on_before_zero_grad(TrainerView&, torch::optim::Optimizer&) override { add("on_before_zero_grad"); }

 private:
  void add(const std::string& hook) { calls_.push_back("cb:" + hook); }
  std::vector<std::string>& calls_;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

// The order as Volt implements it, so that any reordering is a deliberate change.
// Differences from Lightning 2.x noted for the record: Lightning calls the callbacks'
// setup before the module's (Volt: module first); Lightning's automatic optimization
// calls on_before_zero_grad right after training_step, before backward (Volt: after the
// optimizer step); Lightning calls callbacks before the module for on_train_batch_end,
// on_validation_batch_end and on_validation_epoch_end (Volt: module first, so that the
// module's epoch-end logging is visible to the callbacks).
TEST(Loops, HookOrderForOneEpochWithValidation) {
  ScratchDir dir;
  BoringModule m;
  auto recorder = std::make_shared<RecordingCallback>(m.calls);
  Trainer trainer(quiet_options(dir.path()), {recorder});
  trainer.fit(m, random_loader(8, 4, 1), random_loader(4, 4, 2));  // 2 train batches, 1 val batch

  const std::vector<std::string> train_batch = {
      "cb:on_train_batch_start",
      "on_train_batch_start",
      "training_step",
      "cb:on_before_backward",
      "on_before_backward",
      "cb:on_after_backward",
      "on_after_backward",
      "cb:on_before_optimizer_step",
      "on_before_optimizer_step",
      "cb:on_before_zero_grad",
      "on_before_zero_grad",
      "on_train_batch_end",
      "cb:on_train_batch_end",
  };
  std::vector<std::string> expected = {
      "setup(fit)",      "cb:setup(fit)",           "configure_model",         "configure_optimizers",
      "cb:on_fit_start", "on_fit_start",            "cb:on_train_start",       "on_train_start",
      "cb:on_train_epoch_start", "on_train_epoch_start",
  };
  expected.insert(expected.end(), train_batch.begin(), train_batch.end());
  expected.insert(expected.end(), train_batch.begin(), train_batch.end());
  const std::vector<std::string> tail = {
      "cb:on_validation_start",
      "on_validation_start",
      "cb:on_validation_epoch_start",
      "on_validation_epoch_start",
      "cb:on_validation_batch_start",
      "on_validation_batch_start",
      "validation_step",
      "on_validation_batch_end",
      "cb:on_validation_batch_end",
      "on_validation_epoch_end",
      "cb:on_validation_epoch_end",
      "cb:on_validation_end",
      "on_validation_end",
      // Lightning 2.x: the end-of-epoch validation runs before on_train_epoch_end.
      "cb:on_train_epoch_end",
      "on_train_epoch_end",
      "cb:on_train_end",
      "on_train_end",
      "cb:on_fit_end",
      "on_fit_end",
      "cb:teardown(fit)",
      "teardown(fit)",
  };
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(m.calls, expected) << "actual:\n" << join(m.calls);
}

TEST(Loops, HookOrderOfTheSanityCheck) {
  ScratchDir dir;
  BoringModule m3;
  auto recorder3 = std::make_shared<RecordingCallback>(m3.calls);
  auto o3 = quiet_options(dir.path());
  o3.num_sanity_val_steps = 1;
  Trainer t3(o3, {recorder3});
  t3.fit(m3, random_loader(4, 4, 1), random_loader(4, 4, 2));
  ASSERT_GT(m3.calls.size(), 21u) << join(m3.calls);
  const std::vector<std::string> head(m3.calls.begin(), m3.calls.begin() + 21);
  const std::vector<std::string> expected = {
      "setup(fit)",
      "cb:setup(fit)",
      "configure_model",
      "configure_optimizers",
      "cb:on_fit_start",
      "on_fit_start",
      "cb:on_sanity_check_start",
      "cb:on_validation_start",
      "on_validation_start",
      "cb:on_validation_epoch_start",
      "on_validation_epoch_start",
      "cb:on_validation_batch_start",
      "on_validation_batch_start",
      "validation_step",
      "on_validation_batch_end",
      "cb:on_validation_batch_end",
      "on_validation_epoch_end",
      "cb:on_validation_epoch_end",
      "cb:on_validation_end",
      "on_validation_end",
      "cb:on_sanity_check_end",
  };
  EXPECT_EQ(head, expected) << "actual:\n" << join(m3.calls);
  EXPECT_EQ(m3.calls.at(21), "cb:on_train_start");
}

TEST(Loops, HookOrderOfValidateTestAndPredict) {
  ScratchDir dir;
  BoringModule m;
  auto recorder = std::make_shared<RecordingCallback>(m.calls);
  Trainer trainer(quiet_options(dir.path()), {recorder});
  trainer.test(m, random_loader(4, 4, 1));
  const std::vector<std::string> test = {
      "setup(test)",           "cb:setup(test)",        "configure_model",       "cb:on_test_start",
      "on_test_start",         "cb:on_test_epoch_start", "on_test_epoch_start",  "cb:on_test_batch_start",
      "on_test_batch_start",   "test_step",             "on_test_batch_end",     "cb:on_test_batch_end",
      "on_test_epoch_end",     "cb:on_test_epoch_end",  "cb:on_test_end",        "on_test_end",
      "cb:teardown(test)",     "teardown(test)",
  };
  EXPECT_EQ(m.calls, test) << "actual:\n" << join(m.calls);

  m.calls.clear();
  trainer.predict(m, random_loader(4, 4, 1));
  const std::vector<std::string> predict = {
      "setup(predict)",   "cb:setup(predict)",         "configure_model", "cb:on_predict_start",
      "on_predict_start", "on_predict_epoch_start",    "cb:on_predict_batch_start", "predict_step",
      "cb:on_predict_batch_end", "on_predict_epoch_end", "cb:on_predict_end", "on_predict_end",
      "cb:teardown(predict)", "teardown(predict)",
  };
  EXPECT_EQ(m.calls, predict) << "actual:\n" << join(m.calls);
}

// --- validate / test / predict ---

double manual_mean_loss(BoringModule& m, const std::shared_ptr<volt::data::TensorDataset>& ds) {
  at::NoGradGuard no_grad;
  Batch all = {ds->tensors()[0], ds->tensors()[1]};
  return m.loss_of(all).item<double>();
}

double unweighted_mean_of_batch_losses(BoringModule& m, const std::shared_ptr<volt::data::TensorDataset>& ds,
                                       int64_t batch) {
  at::NoGradGuard no_grad;
  const int64_t n = ds->size();
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += batch) {
    Batch b = {ds->tensors()[0].slice(0, i, std::min(n, i + batch)), ds->tensors()[1].slice(0, i, std::min(n, i + batch))};
    sum += m.loss_of(b).item<double>();
    ++count;
  }
  return sum / static_cast<double>(count);
}

TEST(Loops, ValidateReturnsTheMeanLossWeightedByBatchSize) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  volt::seed_everything(21);  // fixed weights, so the batch losses differ by a known amount
  BoringModule m;
  {
    at::NoGradGuard no_grad;
    m.layer->weight.mul_(10);
  }
  auto ds = random_dataset(10, 21);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 4;  // batches of 4, 4, 2
  auto loader = std::make_shared<volt::data::DataLoader>(ds, lo);
  const MetricMap metrics = trainer.validate(m, loader);
  EXPECT_EQ(keys_of(metrics), (std::set<std::string>{"val_loss"}));
  const double expected = manual_mean_loss(m, ds);
  EXPECT_NEAR(metrics.at("val_loss"), expected, 1e-6);
  // The check can tell a weighted mean from a plain mean of the three batch means.
  EXPECT_GT(std::abs(expected - unweighted_mean_of_batch_losses(m, ds, 4)), 1e-4);
  EXPECT_EQ(m.val_steps, 3);
  EXPECT_NEAR(trainer.callback_metrics().at("val_loss"), expected, 1e-6);
}

TEST(Loops, TestReturnsTheMeanLossWeightedByBatchSize) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  BoringModule m;
  auto ds = random_dataset(10, 22);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 4;
  const MetricMap metrics = trainer.test(m, std::make_shared<volt::data::DataLoader>(ds, lo));
  EXPECT_EQ(keys_of(metrics), (std::set<std::string>{"test_loss"}));
  EXPECT_NEAR(metrics.at("test_loss"), manual_mean_loss(m, ds), 1e-6);
  EXPECT_EQ(m.test_steps, 3);
}

TEST(Loops, PredictReturnsOneTensorPerBatch) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  BoringModule m;
  auto ds = random_dataset(10, 23);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = 4;
  const auto out = trainer.predict(m, std::make_shared<volt::data::DataLoader>(ds, lo));
  ASSERT_EQ(out.size(), 3u);
  const std::vector<int64_t> rows = {4, 4, 2};
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].sizes().vec(), (std::vector<int64_t>{rows[i], 2})) << i;
    EXPECT_FALSE(out[i].requires_grad()) << i;
    const auto x = ds->tensors()[0].slice(0, static_cast<int64_t>(i) * 4, static_cast<int64_t>(i) * 4 + rows[i]);
    EXPECT_TRUE(at::allclose(out[i], m.forward(x))) << i;
  }
}

TEST(Loops, EvaluationStepsRunInEvalModeWithoutGradAndTrainingModeIsRestored) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  o.num_sanity_val_steps = 1;
  Trainer trainer(o);
  BoringModule m;
  trainer.fit(m, random_loader(8, 4, 1), random_loader(8, 4, 2));
  EXPECT_GT(m.val_steps, 0);
  EXPECT_FALSE(m.eval_step_saw_training);
  EXPECT_FALSE(m.eval_step_saw_grad);
  // Training steps after each validation (and the sanity check) are back in training mode.
  EXPECT_FALSE(m.train_step_saw_eval);
  EXPECT_FALSE(m.train_step_saw_no_grad);

  EXPECT_TRUE(m.is_training());
  trainer.validate(m, random_loader(8, 4, 2));
  trainer.test(m, random_loader(8, 4, 2));
  trainer.predict(m, random_loader(8, 4, 2));
  EXPECT_FALSE(m.eval_step_saw_training);
  EXPECT_FALSE(m.eval_step_saw_grad);
  EXPECT_TRUE(m.is_training());
  EXPECT_TRUE(at::GradMode::is_enabled());

  // A module in eval mode stays in eval mode.
  m.eval();
  trainer.validate(m, random_loader(8, 4, 2));
  EXPECT_FALSE(m.is_training());
}

}  // namespace
