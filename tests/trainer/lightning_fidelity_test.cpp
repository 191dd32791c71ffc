// The loop and logging behaviour of PyTorch Lightning 2.2.5, case by case. Every expected
// value below was read from Lightning itself (the oracle in shared/oracle, same
// configuration: a BoringModel-like module, CSVLogger, 10 training batches of size 1 per
// epoch unless said otherwise), not derived from Volt's code.
#include <gtest/gtest.h>

#include <ATen/ops/scalar_tensor.h>
#include <torch/optim/sgd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "volt/callbacks/early_stopping.h"
#include "volt/callbacks/lr_monitor.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/loggers/csv_logger.h"
#include "volt/loggers/logger.h"
#include "volt/trainer/trainer.h"

namespace {

namespace fs = std::filesystem;
using volt::Batch;
using volt::MetricMap;
using volt::StepContext;
using volt::Trainer;
using volt::TrainerOptions;
using volt::TrainerView;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Every row a logger receives, as "step:key,key" (keys sorted, "epoch" left out) and the
/// epoch column apart.
class RowLogger : public volt::loggers::Logger {
 public:
  std::string name() const override { return "rows"; }
  std::string version() override { return "version_0"; }
  std::string log_dir() override { return dir; }
  void log_hyperparams(const std::map<std::string, std::string>&) override {}
  void log_metrics(const MetricMap& metrics, int64_t step) override {
    std::string row = std::to_string(step) + ":";
    bool first = true;
    for (const auto& [key, value] : metrics) {
      if (key == "epoch") continue;
      row += (first ? "" : ",") + key;
      first = false;
    }
    rows.push_back(row);
    auto it = metrics.find("epoch");
    epochs.push_back(it == metrics.end() ? -1 : static_cast<int64_t>(it->second));
    values.push_back(metrics);
  }

  std::string dir = ".";
  std::vector<std::string> rows;
  std::vector<int64_t> epochs;  // -1: no epoch column
  std::vector<MetricMap> values;
};

/// BoringModule whose validation loss follows a script (one value per validation run),
/// with an optional epoch-interval StepLR, counting validation runs and where they ran.
class ScriptedModule : public BoringModule {
 public:
  std::vector<double> val_losses;  // empty: the real loss
  bool epoch_scheduler = false;
  int64_t validations = 0;
  std::vector<int64_t> validation_steps;  // global_step at each validation

  void validation_step(Batch& batch, StepContext& ctx) override {
    if (ctx.stage() == volt::RunningStage::kSanityChecking || val_losses.empty()) {
      BoringModule::validation_step(batch, ctx);
      return;
    }
    const size_t i = std::min(static_cast<size_t>(validations), val_losses.size() - 1);
    ctx.log("val_loss", at::scalar_tensor(val_losses[i]));
    last_global_step_ = ctx.global_step();
  }
  void on_validation_epoch_end() override {
    if (val_losses.empty()) return;
    ++validations;
    validation_steps.push_back(last_global_step_);
  }
  volt::OptimizerConfig configure_optimizers() override {
    auto sgd = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    if (!epoch_scheduler) return sgd;
    return {sgd, volt::LRSchedulerConfig{std::make_shared<volt::StepLR>(*sgd, 1, 0.5)}};
  }

 private:
  int64_t last_global_step_ = -1;
};

/// Sets should_stop (through request_stop) at on_train_batch_end once global_step reaches `step`.
class StopAtStep : public volt::callbacks::Callback {
 public:
  explicit StopAtStep(int64_t step) : step_(step) {}
  std::string state_key() const override { return "StopAtStep"; }
  void on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) override {
    if (view.state().global_step == step_) view.request_stop("");
  }

 private:
  int64_t step_;
};

std::shared_ptr<volt::callbacks::EarlyStopping> early_stopping(int64_t patience) {
  volt::callbacks::EarlyStopping::Options o;
  o.monitor = "val_loss";
  o.patience = patience;
  return std::make_shared<volt::callbacks::EarlyStopping>(o);
}

TrainerOptions fidelity_options(const std::string& root, int64_t max_epochs, int64_t log_every_n_steps) {
  TrainerOptions o = quiet_options(root);
  o.max_epochs = max_epochs;
  o.log_every_n_steps = log_every_n_steps;
  o.logger = true;  // the tests pass their own loggers
  return o;
}

/// Runs a fit over 10 training batches and 2 validation batches (batch size 1).
void fit10(Trainer& trainer, BoringModule& module) {
  trainer.fit(module, random_loader(10, 1, 1), random_loader(2, 1, 2));
}

/// metrics.csv as rows of "epoch|step|key,key" (keys with a value, sorted as the header).
std::vector<std::string> csv_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) header.push_back(cell);
  }
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    cells.resize(header.size());
    std::string epoch, step, keys;
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == "epoch") {
        epoch = cells[i];
      } else if (header[i] == "step") {
        step = cells[i];
      } else if (!cells[i].empty()) {
        keys += (keys.empty() ? "" : ",") + header[i];
      }
    }
    out.push_back(epoch + "|" + step + "|" + keys);
  }
  return out;
}

// --- 1. step values ---

TEST(LightningFidelity, MetricsCsvRowsUseLightningsBatchesThatStepped) {
  ScratchDir dir;
  ScriptedModule m;
  m.epoch_scheduler = true;
  auto o = fidelity_options(dir.path(), 2, 5);
  auto csv = std::make_shared<volt::loggers::CSVLogger>(dir.path());
  Trainer trainer(o, {std::make_shared<volt::callbacks::LearningRateMonitor>()}, {csv});
  fit10(trainer, m);
  trainer.test(m, random_loader(2, 1, 3));
  const std::string path = csv->log_dir() + "/metrics.csv";
  ASSERT_TRUE(fs::exists(path)) << path;
  // Lightning 2.2.5, row for row (the LR rows carry no epoch; the test row has epoch 2).
  const std::vector<std::string> expected = {
      "|0|lr-SGD",       "0|4|train_loss",  "0|9|train_loss", "0|9|val_loss",   "|10|lr-SGD",
      "1|14|train_loss", "1|19|train_loss", "1|19|val_loss",  "2|20|test_loss",
  };
  EXPECT_EQ(csv_rows(path), expected);
}

TEST(LightningFidelity, EpochAggregatesOfTrainingAreLoggedOneStepBack) {
  ScratchDir dir;
  class EpochLogging : public ScriptedModule {
    at::Tensor training_step(Batch& batch, StepContext& ctx) override {
      at::Tensor loss = loss_of(batch);
      ctx.log("train_loss", loss, {.on_step = true, .on_epoch = true});
      return loss;
    }
  } m;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(fidelity_options(dir.path(), 2, 5), {}, {rows});
  fit10(trainer, m);
  const std::vector<std::string> expected = {"4:train_loss_step",  "9:train_loss_step",  "9:val_loss",
                                             "9:train_loss_epoch", "14:train_loss_step", "19:train_loss_step",
                                             "19:val_loss",        "19:train_loss_epoch"};
  EXPECT_EQ(rows->rows, expected);
}

TEST(LightningFidelity, StopRequestedAtTrainBatchEndLogsThatBatchAndValidatesBeforeStopping) {
  ScratchDir dir;
  ScriptedModule m;
  auto rows = std::make_shared<RowLogger>();
  auto spy = std::make_shared<volt::testing::ValidationSpy>();
  Trainer trainer(fidelity_options(dir.path(), 2, 5), {std::make_shared<StopAtStep>(6), spy}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"4:train_loss", "5:train_loss", "5:val_loss"}));
  EXPECT_EQ(trainer.global_step(), 6);
  ASSERT_EQ(spy->starts.size(), 1u);
  EXPECT_EQ(spy->starts[0].global_step, 6);
  EXPECT_EQ(trainer.current_epoch(), 1);
}

TEST(LightningFidelity, AccumulatingBatchesLogNothingAndRowsUseTheStepsTaken) {
  ScratchDir dir;
  ScriptedModule m;
  m.epoch_scheduler = false;
  auto o = fidelity_options(dir.path(), 1, 2);
  o.accumulate_grad_batches = 2;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"1:train_loss", "3:train_loss", "4:val_loss"}));
  EXPECT_EQ(trainer.global_step(), 5);
}

TEST(LightningFidelity, AStepValueLoggedOnceStaysInTheEpochsLaterRows) {
  ScratchDir dir;
  class FirstOnly : public ScriptedModule {
    at::Tensor training_step(Batch& batch, StepContext& ctx) override {
      if (ctx.batch_idx() == 0) ctx.log("first_only", at::scalar_tensor(7.0));
      at::Tensor loss = loss_of(batch);
      ctx.log("train_loss", loss);
      return loss;
    }
  } m;
  auto o = fidelity_options(dir.path(), 2, 2);
  o.limit_train_batches = volt::BatchLimit::count(4);
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {}, {rows});
  trainer.fit(m, random_loader(10, 1, 1), random_loader(3, 1, 2));
  const std::vector<std::string> train_rows = {rows->rows[0], rows->rows[1]};
  EXPECT_EQ(train_rows, (std::vector<std::string>{"1:first_only,train_loss", "3:first_only,train_loss"}));
}

TEST(LightningFidelity, ValidationStepValuesAreLoggedAtABatchCountThatContinuesAcrossValidations) {
  ScratchDir dir;
  class StepLogging : public ScriptedModule {
    void validation_step(Batch& batch, StepContext& ctx) override {
      ctx.log("val_step_metric", at::scalar_tensor(static_cast<double>(ctx.batch_idx())),
              {.on_step = true, .on_epoch = false});
      ctx.log("val_loss", loss_of(batch));
    }
  } m;
  auto o = fidelity_options(dir.path(), 2, 2);
  o.limit_train_batches = volt::BatchLimit::count(4);
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {}, {rows});
  trainer.fit(m, random_loader(10, 1, 1), random_loader(3, 1, 2));
  const std::vector<std::string> expected = {
      "1:train_loss", "3:train_loss", "0:val_step_metric", "1:val_step_metric", "2:val_step_metric", "3:val_loss",
      "5:train_loss", "7:train_loss", "3:val_step_metric", "4:val_step_metric", "5:val_step_metric", "7:val_loss",
  };
  EXPECT_EQ(rows->rows, expected);
  // Evaluation step rows carry no epoch column, training rows do.
  EXPECT_EQ(rows->epochs[2], -1);
  EXPECT_EQ(rows->epochs[0], 0);
}

TEST(LightningFidelity, AnUndefinedLossSkipsBackwardButTheOptimizerStepStillCounts) {
  // Lightning: training_step returning None at batch 3 of 10 still ends with global_step 10
  // and rows at steps 4 and 9.
  ScratchDir dir;
  class SkipsBatch3 : public ScriptedModule {
    at::Tensor training_step(Batch& batch, StepContext& ctx) override {
      if (ctx.batch_idx() == 3) return at::Tensor();
      return BoringModule::training_step(batch, ctx);
    }
  } m;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(fidelity_options(dir.path(), 1, 5), {}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(trainer.global_step(), 10);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"4:train_loss", "9:train_loss", "9:val_loss"}));
}

// --- 2. fractional val_check_interval ---

TEST(LightningFidelity, FractionalValCheckIntervalThatDoesNotDivideTheEpochSkipsTheLastBatch) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1.0};
  auto o = fidelity_options(dir.path(), 2, 5);
  o.val_check_interval = volt::BatchLimit::fraction(0.3);
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validations, 6);  // Lightning: after batches 3, 6 and 9 of each epoch
  EXPECT_EQ(m.validation_steps, (std::vector<int64_t>{3, 6, 9, 13, 16, 19}));
  const std::vector<std::string> expected = {"2:val_loss",   "4:train_loss", "5:val_loss",    "8:val_loss",
                                             "9:train_loss", "12:val_loss",  "14:train_loss", "15:val_loss",
                                             "18:val_loss",  "19:train_loss"};
  EXPECT_EQ(rows->rows, expected);
}

// --- 3. a stop at a mid-epoch validation ---

TEST(LightningFidelity, EarlyStoppingAtAMidEpochValidationStopsRightAfterIt) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto o = fidelity_options(dir.path(), 3, 5);
  o.val_check_interval = volt::BatchLimit::fraction(0.25);
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {early_stopping(0)}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validations, 2);
  EXPECT_EQ(trainer.global_step(), 4);  // no batch after the validation that stopped
  EXPECT_EQ(trainer.current_epoch(), 1);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"1:val_loss", "3:val_loss"}));
}

TEST(LightningFidelity, EarlyStoppingAtAValidationInsideAnAccumulationWindowTakesNoFurtherStep) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto o = fidelity_options(dir.path(), 3, 2);
  o.val_check_interval = volt::BatchLimit::count(3);
  o.accumulate_grad_batches = 2;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {early_stopping(0)}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validations, 2);
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"1:val_loss", "1:train_loss", "2:val_loss"}));
}

// --- 4. a stop held back by min_epochs / min_steps ---

TEST(LightningFidelity, StopHeldBackByMinEpochsLogsEveryBatchUntilItTakesEffect) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto o = fidelity_options(dir.path(), 4, 5);
  o.min_epochs = 2;
  o.val_check_interval = volt::BatchLimit::fraction(0.5);
  auto rows = std::make_shared<RowLogger>();
  auto stopper = early_stopping(0);
  Trainer trainer(o, {stopper}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validations, 4);
  EXPECT_EQ(trainer.global_step(), 20);
  EXPECT_EQ(stopper->stopped_epoch(), 1) << "the last check that asked to stop, as Lightning";
  const std::vector<std::string> expected = {
      "4:train_loss",  "4:val_loss",    "9:train_loss",  "9:val_loss",  "10:train_loss", "11:train_loss",
      "12:train_loss", "13:train_loss", "14:train_loss", "14:val_loss", "15:train_loss", "16:train_loss",
      "17:train_loss", "18:train_loss", "19:train_loss", "19:val_loss",
  };
  EXPECT_EQ(rows->rows, expected);
}

TEST(LightningFidelity, StopHeldBackByMinStepsValidatesAtTheBatchWhereItTakesEffect) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto o = fidelity_options(dir.path(), 4, 5);
  o.min_steps = 13;
  o.val_check_interval = volt::BatchLimit::fraction(0.5);
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {early_stopping(0)}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validation_steps, (std::vector<int64_t>{5, 10, 13}));
  EXPECT_EQ(trainer.global_step(), 13);
  const std::vector<std::string> expected = {"4:train_loss",  "4:val_loss",    "9:train_loss",  "9:val_loss",
                                             "10:train_loss", "11:train_loss", "12:train_loss", "12:val_loss"};
  EXPECT_EQ(rows->rows, expected);
}

TEST(LightningFidelity, MinStepsAloneMakesTheFirstEpochAMinimum) {
  // Lightning: min_steps given, min_epochs unset -> min_epochs=1. A stop at step 3 with
  // min_steps=8 takes effect at the end of epoch 0, not at step 8.
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1.0};
  auto o = fidelity_options(dir.path(), 4, 5);
  o.min_steps = 8;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {std::make_shared<StopAtStep>(3)}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(trainer.global_step(), 10);
  EXPECT_EQ(m.validation_steps, (std::vector<int64_t>{10}));
  const std::vector<std::string> expected = {"2:train_loss", "3:train_loss", "4:train_loss",
                                             "5:train_loss", "6:train_loss", "7:train_loss",
                                             "8:train_loss", "9:train_loss", "9:val_loss"};
  EXPECT_EQ(rows->rows, expected);
}

// --- 5. max_steps ending an epoch early ---

TEST(LightningFidelity, MaxStepsEndingAnEpochEarlyDoesNotValidateThere) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {1.0};
  auto o = fidelity_options(dir.path(), 4, 5);
  o.max_steps = 15;
  auto rows = std::make_shared<RowLogger>();
  Trainer trainer(o, {}, {rows});
  fit10(trainer, m);
  EXPECT_EQ(m.validation_steps, (std::vector<int64_t>{10}));
  EXPECT_EQ(trainer.global_step(), 15);
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_EQ(rows->rows, (std::vector<std::string>{"4:train_loss", "9:train_loss", "9:val_loss", "14:train_loss"}));
}

TEST(LightningFidelity, StrictEarlyStoppingFailsWhenMaxStepsEndsTheFirstEpochBeforeAnyValidation) {
  ScratchDir dir;
  ScriptedModule m;
  auto o = fidelity_options(dir.path(), 4, 5);
  o.max_steps = 5;
  Trainer trainer(o, {early_stopping(3)});
  try {
    fit10(trainer, m);
    FAIL() << "no error";
  } catch (const volt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("val_loss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train_loss"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.val_steps, 0);
}

TEST(LightningFidelity, EarlyStoppingDoesNotCheckUnderFastDevRun) {
  ScratchDir dir;
  ScriptedModule m;
  m.val_losses = {std::numeric_limits<double>::quiet_NaN()};
  auto o = quiet_options(dir.path());
  o.fast_dev_run = 2;
  Trainer trainer(o, {early_stopping(0)});
  fit10(trainer, m);
  EXPECT_EQ(m.validations, 1);
  EXPECT_FALSE(trainer.should_stop()) << "a NaN val_loss would stop a normal run";
}

TEST(LightningFidelity, ModelCheckpointSavesNothingUnderFastDevRun) {
  ScratchDir dir;
  BoringModule m;
  auto o = quiet_options(dir.path());
  o.fast_dev_run = 2;
  o.enable_checkpointing = true;
  Trainer trainer(o);
  fit10(trainer, m);
  EXPECT_EQ(trainer.best_model_path(), "") << "Lightning's stays empty";
}

TEST(LightningFidelity, SanityCheckRunsWhenThereIsNothingToTrainButNotWhenResuming) {
  ScratchDir dir;
  for (const auto& edit : std::vector<std::function<void(TrainerOptions&)>>{
           [](TrainerOptions& o) { o.max_epochs = 0; }, [](TrainerOptions& o) { o.max_steps = 0; }}) {
    BoringModule m;
    auto o = quiet_options(dir.path());
    o.num_sanity_val_steps = 2;
    edit(o);
    Trainer trainer(o);
    fit10(trainer, m);
    EXPECT_EQ(m.sanity_steps, 2);
    EXPECT_EQ(m.train_steps, 0);
  }
  auto o = quiet_options(dir.path());
  o.num_sanity_val_steps = 2;
  o.enable_checkpointing = true;
  volt::callbacks::ModelCheckpoint::Options mc;
  mc.save_last = true;
  mc.dirpath = dir.path() + "/resume";
  {
    BoringModule m;
    Trainer first(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mc)});
    fit10(first, m);
    EXPECT_EQ(m.sanity_steps, 2);
  }
  BoringModule m;
  o.max_epochs = 2;
  Trainer second(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mc)});
  second.fit(m, random_loader(10, 1, 1), random_loader(2, 1, 2), dir.path() + "/resume/last.ckpt");
  EXPECT_EQ(m.sanity_steps, 0) << "Lightning skips the sanity check when resuming";
  EXPECT_EQ(m.train_steps, 10);
}

// --- 6. a fractional limit that selects no batch ---

TEST(LightningFidelity, FractionalLimitThatSelectsNoBatchIsAConfigErrorNamingTheSmallestThatWorks) {
  ScratchDir dir;
  auto message = [&](const std::function<void(TrainerOptions&)>& edit) {
    BoringModule m;
    auto o = quiet_options(dir.path());
    edit(o);
    Trainer trainer(o);
    try {
      fit10(trainer, m);
    } catch (const volt::ConfigError& e) {
      EXPECT_EQ(m.train_steps, 0) << "refused before any work";
      return std::string(e.what());
    }
    return std::string("(no ConfigError)");
  };
  const std::string train =
      message([](TrainerOptions& o) { o.limit_train_batches = volt::BatchLimit::fraction(0.05); });
  EXPECT_NE(train.find("limit_train_batches=0.05"), std::string::npos) << train;
  EXPECT_NE(train.find("limit_train_batches=0.1"), std::string::npos) << train;
  const std::string val = message([](TrainerOptions& o) { o.limit_val_batches = volt::BatchLimit::fraction(0.05); });
  EXPECT_NE(val.find("limit_val_batches=0.05"), std::string::npos) << val;
  EXPECT_NE(val.find("limit_val_batches=0.5"), std::string::npos) << val;
}

// --- 7. fit(ckpt_path="last") before any checkpoint exists ---

TEST(LightningFidelity, FitFromLastWithoutAnyCheckpointWarnsAndTrainsFromScratch) {
  ScratchDir dir;
  BoringModule m;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  Trainer trainer(o);
  ::testing::internal::CaptureStderr();
  trainer.fit(m, random_loader(10, 1, 1), random_loader(2, 1, 2), "last");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(trainer.global_step(), 10);
  EXPECT_NE(err.find("ckpt_path=\"last\""), std::string::npos) << err;
  EXPECT_NE(err.find("no last checkpoint"), std::string::npos) << err;
}

TEST(LightningFidelity, FitFromLastInANewTrainerFindsTheLastCheckpointOnDisk) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  volt::callbacks::ModelCheckpoint::Options mc;
  mc.save_last = true;
  mc.dirpath = dir.path() + "/ckpts";
  {
    BoringModule m;
    Trainer first(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mc)});
    first.fit(m, random_loader(10, 1, 1), random_loader(2, 1, 2));
  }
  ASSERT_TRUE(fs::exists(dir.path() + "/ckpts/last.ckpt"));
  BoringModule m;
  o.max_epochs = 2;
  Trainer second(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mc)});
  second.fit(m, random_loader(10, 1, 1), random_loader(2, 1, 2), "last");
  EXPECT_EQ(m.train_steps, 10) << "resumed after epoch 0";
  EXPECT_EQ(second.global_step(), 20);
}

}  // namespace
