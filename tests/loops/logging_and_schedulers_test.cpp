// The loops end to end, part 2: ctx.log's semantics in each hook and LR scheduler
// stepping (epoch and step intervals, frequencies, accumulation).
#include "loops/loops_support.h"

namespace {

// --- ctx.log ---

LogOptions when(bool on_step, bool on_epoch, const std::string& reduce_fx = "mean") {
  LogOptions o;
  o.on_step = on_step;
  o.on_epoch = on_epoch;
  o.reduce_fx = reduce_fx;
  return o;
}

/// Logs fixed values per batch so every aggregate is known: training batches 0..3 log
/// v = 3, 1, 4, 2; validation batches (sizes 4, 4, 2) log their index.
class LoggingModule : public BoringModule {
 public:
  bool log_a_vector = false;
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    const double v = std::vector<double>{3, 1, 4, 2}.at(static_cast<size_t>(ctx.batch_idx()));
    ctx.log("a", v);                              // training default: on_step only
    ctx.log("b", v, when(true, true));            // b_step, b_epoch
    ctx.log("c_sum", v, when(false, true, "sum"));
    ctx.log("c_max", v, when(false, true, "max"));
    ctx.log("c_min", v, when(false, true, "min"));
    LogOptions prog_bar;
    prog_bar.prog_bar = true;
    ctx.log("p", v, prog_bar);
    LogOptions hidden;
    hidden.logger = false;
    ctx.log("hidden", v, hidden);
    if (log_a_vector) ctx.log("vec", at::ones({2}));
    return loss_of(batch);
  }
  void validation_step(Batch&, StepContext& ctx) override {
    const auto i = static_cast<double>(ctx.batch_idx());
    ctx.log("v", i);  // eval default: on_epoch only
    LogOptions unweighted;
    unweighted.batch_size = 1;
    ctx.log("v_unweighted", i, unweighted);  // plain mean
    ctx.log("v_step", i, when(true, false));
    LogOptions prog_bar;
    prog_bar.prog_bar = true;
    ctx.log("v_pb", i, prog_bar);
  }
  void on_validation_epoch_end() override { log("from_epoch_end", 42.0); }
};

TEST(Loops, LogDefaultsAndReductionsInTraining) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  LoggingModule m;
  trainer.fit(m, random_loader(16, 4, 1));  // 4 batches of 4
  const MetricMap& cm = trainer.callback_metrics();
  EXPECT_EQ(cm.at("a"), 2);  // the last step's value
  EXPECT_EQ(cm.count("a_step"), 0u);
  EXPECT_EQ(cm.count("a_epoch"), 0u);
  EXPECT_EQ(cm.at("b_step"), 2);
  EXPECT_EQ(cm.at("b_epoch"), 2.5);
  EXPECT_EQ(cm.at("b"), 2.5);  // the epoch value replaces the step value at epoch end
  EXPECT_EQ(cm.at("c_sum"), 10);
  EXPECT_EQ(cm.at("c_max"), 4);
  EXPECT_EQ(cm.at("c_min"), 1);
  EXPECT_EQ(cm.count("c_sum_epoch"), 0u);
  // Only prog_bar metrics reach the progress bar.
  EXPECT_EQ(keys_of(trainer.progress_bar_metrics()), (std::set<std::string>{"p"}));
  EXPECT_EQ(trainer.progress_bar_metrics().at("p"), 2);
  // Loggers get the forked names, never the plain "b", and nothing logged with logger=false.
  const MetricMap& lm = trainer.logged_metrics();
  EXPECT_EQ(lm.count("b_epoch"), 1u);
  EXPECT_EQ(lm.count("b"), 0u);
  EXPECT_EQ(lm.count("hidden"), 0u);
  EXPECT_EQ(lm.at("c_sum"), 10);
  EXPECT_EQ(cm.at("hidden"), 2);
}

TEST(Loops, LogInValidationIsAnEpochMeanWeightedByBatchSize) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  LoggingModule m;
  const MetricMap metrics = trainer.validate(m, random_loader(10, 4, 1));  // 4, 4, 2
  EXPECT_NEAR(metrics.at("v"), 0.8, 1e-12);  // (0*4 + 1*4 + 2*2) / 10
  EXPECT_NEAR(metrics.at("v_unweighted"), 1.0, 1e-12);
  EXPECT_EQ(metrics.at("from_epoch_end"), 42);  // Module::log from on_validation_epoch_end
  EXPECT_EQ(metrics.count("v_step"), 0u);       // on_step only: not an epoch metric
  EXPECT_EQ(trainer.callback_metrics().at("v_step"), 2);
  EXPECT_EQ(keys_of(trainer.progress_bar_metrics()), (std::set<std::string>{"v_pb"}));
}

TEST(Loops, LogOfANonScalarIsAConfigErrorNamingTheMetric) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  LoggingModule m;
  m.log_a_vector = true;
  try {
    trainer.fit(m, random_loader(16, 4, 1));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "\"vec\"")) << e.what();
    EXPECT_TRUE(contains(e.what(), "2 elements")) << e.what();
  }
}

TEST(Loops, LogWithAnUnknownReductionIsAConfigError) {
  ScratchDir dir;
  struct M : BoringModule {
    at::Tensor training_step(Batch& batch, StepContext& ctx) override {
      LogOptions median;
      median.reduce_fx = "median";
      ctx.log("x", 1.0, median);
      return loss_of(batch);
    }
  } m;
  Trainer trainer(quiet_options(dir.path()));
  try {
    trainer.fit(m, random_loader(8, 4, 1));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "median")) << e.what();
  }
}

/// Logs from on_train_epoch_end, as Lightning users log epoch-level training metrics.
class TrainEpochEndLoggingModule : public BoringModule {
 public:
  void on_train_epoch_end() override {
    BoringModule::on_train_epoch_end();
    log("epoch_default", 7.0);
    log("epoch_explicit", 8.0, when(false, true));
  }
};

// Lightning logs from on_train_epoch_end with on_epoch=True by default, and sends those
// values to callback_metrics and the loggers after the hook (update_train_epoch_metrics).
// Volt does the same: the epoch is reduced after the module's hook.
TEST(Loops, ModuleLogInOnTrainEpochEndReachesCallbackMetricsAndLoggers) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  TrainEpochEndLoggingModule m;
  trainer.fit(m, random_loader(8, 4, 1));
  const MetricMap& cm = trainer.callback_metrics();
  EXPECT_EQ(cm.count("epoch_default"), 1u) << ::testing::PrintToString(keys_of(cm));
  EXPECT_EQ(cm.count("epoch_explicit"), 1u) << ::testing::PrintToString(keys_of(cm));
  const MetricMap& lm = trainer.logged_metrics();
  EXPECT_EQ(lm.count("epoch_default"), 1u) << ::testing::PrintToString(keys_of(lm));
  EXPECT_EQ(lm.count("epoch_explicit"), 1u) << ::testing::PrintToString(keys_of(lm));
}

// Lightning runs monitoring callbacks (EarlyStopping, ModelCheckpoint) after the module's
// on_train_epoch_end, so a metric the module logs there can be monitored at train epoch end.
// Volt keeps that order (non-monitoring callbacks, module, epoch reduction, monitoring callbacks).
TEST(Loops, EarlyStoppingAtTrainEpochEndSeesMetricsLoggedInOnTrainEpochEnd) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 5;
  volt::callbacks::EarlyStopping::Options es;
  es.monitor = "epoch_explicit";  // constant: improves once, then never
  es.patience = 1;
  es.check_on_train_epoch_end = true;
  Trainer trainer(o, {std::make_shared<volt::callbacks::EarlyStopping>(es)});
  TrainEpochEndLoggingModule m;
  try {
    trainer.fit(m, random_loader(8, 4, 1));
  } catch (const ConfigError& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_EQ(trainer.current_epoch(), 2);
}

TEST(Loops, ModuleLogOutsideAStageThrows) {
  BoringModule m;
  EXPECT_THROW(m.log("x", 1.0), volt::Error);
}

// --- LR schedulers ---

/// SGD lr 0.1 with StepLR(step_size=1, gamma=0.5) at the given interval and frequency;
/// records the learning rate each training step and each epoch start sees.
class ScheduledModule : public BoringModule {
 public:
  ScheduledModule(volt::Interval interval, int64_t frequency) : interval_(interval), frequency_(frequency) {}
  std::vector<double> lr_per_step;
  std::vector<double> lr_per_epoch;
  std::shared_ptr<torch::optim::SGD> opt;
  std::shared_ptr<volt::StepLR> sched;

  double lr_now() const { return opt->param_groups()[0].options().get_lr(); }
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    lr_per_step.push_back(lr_now());
    return BoringModule::training_step(batch, ctx);
  }
  void on_train_epoch_start() override { lr_per_epoch.push_back(lr_now()); }
  volt::OptimizerConfig configure_optimizers() override {
    opt = std::make_shared<torch::optim::SGD>(parameters(), torch::optim::SGDOptions(0.1));
    sched = std::make_shared<volt::StepLR>(*opt, 1, 0.5);
    volt::LRSchedulerConfig cfg;
    cfg.scheduler = sched;
    cfg.interval = interval_;
    cfg.frequency = frequency_;
    return volt::OptimizerConfig(opt, cfg);
  }

 private:
  volt::Interval interval_;
  int64_t frequency_;
};

void expect_lrs(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size()) << ::testing::PrintToString(actual);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

TEST(Loops, EpochIntervalSchedulerStepsAfterEachEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  Trainer trainer(o);
  ScheduledModule m(volt::Interval::kEpoch, 1);
  trainer.fit(m, random_loader(8, 4, 1));
  expect_lrs(m.lr_per_epoch, {0.1, 0.05, 0.025});
  expect_lrs(m.lr_per_step, {0.1, 0.1, 0.05, 0.05, 0.025, 0.025});
  EXPECT_EQ(m.sched->last_epoch(), 3);
  EXPECT_NEAR(m.lr_now(), 0.0125, 1e-12);
}

/// Records the learning rate at on_train_epoch_end and can cut epochs short from
/// on_train_batch_start.
class EpochEndLrModule : public ScheduledModule {
 public:
  EpochEndLrModule() : ScheduledModule(volt::Interval::kEpoch, 1) {}
  std::vector<double> lr_at_epoch_end;
  int64_t skip_from_batch = -1;  // on_train_batch_start returns false from this batch on
  void on_train_epoch_end() override { lr_at_epoch_end.push_back(lr_now()); }
  bool on_train_batch_start(Batch&, int64_t batch_idx) override {
    return skip_from_batch < 0 || batch_idx < skip_from_batch;
  }
};

// As Lightning 2.x (_TrainingEpochLoop.advance steps non-plateau epoch schedulers once the
// epoch's last batch is done): the end-of-epoch validation and on_train_epoch_end already
// see the next epoch's rate.
TEST(Loops, EpochIntervalSchedulerStepsAtTheLastBatchBeforeOnTrainEpochEnd) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  Trainer trainer(o);
  EpochEndLrModule m;
  trainer.fit(m, random_loader(8, 4, 1));
  expect_lrs(m.lr_at_epoch_end, {0.05, 0.025});
  expect_lrs(m.lr_per_epoch, {0.1, 0.05});
}

// As Lightning 2.x (epoch schedulers step only when _num_ready_batches_reached): an epoch
// cut short by on_train_batch_start returning false does not step them.
TEST(Loops, EpochCutShortByOnTrainBatchStartDoesNotStepEpochSchedulers) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  Trainer trainer(o);
  EpochEndLrModule m;
  m.skip_from_batch = 1;
  trainer.fit(m, random_loader(16, 4, 1));  // 4 batches, only the first runs
  EXPECT_EQ(m.train_steps, 3);
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_EQ(trainer.current_epoch(), 3);
  expect_lrs(m.lr_per_epoch, {0.1, 0.1, 0.1});
}

TEST(Loops, EpochIntervalSchedulerWithFrequencyTwoStepsEveryOtherEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 4;
  Trainer trainer(o);
  ScheduledModule m(volt::Interval::kEpoch, 2);
  trainer.fit(m, random_loader(4, 4, 1));
  expect_lrs(m.lr_per_epoch, {0.1, 0.1, 0.05, 0.05});
  EXPECT_EQ(m.sched->last_epoch(), 2);
}

TEST(Loops, StepIntervalSchedulerWithFrequencyTwoStepsEveryOtherOptimizerStep) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  ScheduledModule m(volt::Interval::kStep, 2);
  trainer.fit(m, random_loader(24, 4, 1));  // 6 steps
  expect_lrs(m.lr_per_step, {0.1, 0.1, 0.05, 0.05, 0.025, 0.025});
  EXPECT_EQ(m.sched->last_epoch(), 3);
}

TEST(Loops, StepIntervalSchedulerCountsOptimizerStepsNotBatchesWithAccumulation) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  ScheduledModule m(volt::Interval::kStep, 1);
  trainer.fit(m, random_loader(24, 4, 1));  // 6 batches, 3 optimizer steps
  expect_lrs(m.lr_per_step, {0.1, 0.1, 0.05, 0.05, 0.025, 0.025});
  EXPECT_EQ(m.sched->last_epoch(), 3);
}

// --- a second fit and resuming ---

}  // namespace
