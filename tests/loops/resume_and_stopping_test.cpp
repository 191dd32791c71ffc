// The loops end to end, part 3: a second fit, resuming from a checkpoint (mid-epoch,
// epoch end, finished), EarlyStopping and ModelCheckpoint inside a fit.
#include "loops/loops_support.h"

namespace {

TEST(Loops, SecondFitAfterMaxEpochsRunsNothingMore) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  Trainer trainer(o);
  BoringModule m;
  auto loader = random_loader(16, 4, 1);
  trainer.fit(m, loader);
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_EQ(m.train_steps, 8);
  const at::Tensor after_first = m.layer->weight.detach().clone();
  trainer.fit(m, loader);
  EXPECT_EQ(trainer.current_epoch(), 2);
  EXPECT_EQ(trainer.global_step(), 8);
  EXPECT_EQ(m.train_steps, 8);
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "configure_optimizers"), 1);
  EXPECT_TRUE(at::equal(m.layer->weight, after_first));
}

TEST(Loops, ResumingFromACheckpointRunsExactlyTheRemainingEpochs) {
  ScratchDir dir;
  auto loader = random_loader(16, 4, 1);  // 4 batches
  BoringModule first;
  BoringModule uninterrupted;
  {
    at::NoGradGuard no_grad;
    uninterrupted.layer->weight.copy_(first.layer->weight);
    uninterrupted.layer->bias.copy_(first.layer->bias);
  }
  const std::string path = dir / "after_one_epoch.ckpt";
  {
    Trainer t1(quiet_options(dir.path()));  // max_epochs = 1
    t1.fit(first, loader);
    t1.save_checkpoint(path);
  }
  auto o2 = quiet_options(dir.path());
  o2.max_epochs = 2;
  Trainer t2(o2);
  BoringModule resumed;  // different initial weights; the checkpoint replaces them
  t2.fit(resumed, loader, nullptr, path);
  EXPECT_EQ(resumed.train_steps, 4);
  EXPECT_EQ(t2.global_step(), 8);
  EXPECT_EQ(t2.current_epoch(), 2);

  Trainer t3(o2);
  t3.fit(uninterrupted, loader);
  EXPECT_TRUE(at::allclose(resumed.layer->weight, uninterrupted.layer->weight, 0.0, 1e-6));
  EXPECT_TRUE(at::allclose(resumed.layer->bias, uninterrupted.layer->bias, 0.0, 1e-6));
}

TEST(Loops, ResumingAFinishedRunRunsNothing) {
  ScratchDir dir;
  auto loader = random_loader(16, 4, 1);
  const std::string path = dir / "done.ckpt";
  {
    BoringModule m;
    Trainer t1(quiet_options(dir.path()));
    t1.fit(m, loader);
    t1.save_checkpoint(path);
  }
  BoringModule m;
  Trainer t2(quiet_options(dir.path()));  // max_epochs = 1, already reached
  t2.fit(m, loader, nullptr, path);
  EXPECT_EQ(m.train_steps, 0);
  EXPECT_EQ(t2.global_step(), 4);
  EXPECT_EQ(t2.current_epoch(), 1);
}

/// Copies `from`'s weights into `to`.
void copy_weights(const BoringModule& from, BoringModule& to) {
  at::NoGradGuard no_grad;
  to.layer->weight.copy_(from.layer->weight);
  to.layer->bias.copy_(from.layer->bias);
}

TEST(Loops, ResumingFromAMidEpochCheckpointRunsTheRestOfThatEpoch) {
  ScratchDir dir;
  auto loader = random_loader(16, 4, 1);  // 4 batches
  BoringModule first;
  BoringModule uninterrupted;
  copy_weights(first, uninterrupted);
  {
    auto o = quiet_options(dir.path());
    o.enable_checkpointing = true;
    volt::callbacks::ModelCheckpoint::Options mo;
    mo.every_n_train_steps = 2;
    mo.save_top_k = -1;
    Trainer t1(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mo)});
    t1.fit(first, loader);
  }
  const std::string mid = dir / "checkpoints/epoch=0-step=2.ckpt";
  ASSERT_TRUE(std::filesystem::exists(mid)) << ::testing::PrintToString(volt::testing::files_under(dir.path()));
  auto o2 = quiet_options(dir.path());
  o2.max_epochs = 2;
  Trainer t2(o2);
  BoringModule resumed;
  t2.fit(resumed, loader, nullptr, mid);
  EXPECT_EQ(resumed.train_steps, 6);  // batches 2, 3 of epoch 0, then epoch 1
  EXPECT_EQ(t2.global_step(), 8);
  EXPECT_EQ(t2.current_epoch(), 2);
  Trainer t3(o2);
  t3.fit(uninterrupted, loader);
  EXPECT_TRUE(at::allclose(resumed.layer->weight, uninterrupted.layer->weight, 0.0, 1e-6));
}

TEST(Loops, ResumingFromAnEpochEndCheckpointStartsTheNextEpoch) {
  ScratchDir dir;
  auto loader = random_loader(16, 4, 1);
  {
    auto o = quiet_options(dir.path());
    o.enable_checkpointing = true;  // the default ModelCheckpoint saves at epoch end
    BoringModule m;
    Trainer t1(o);
    t1.fit(m, loader, random_loader(8, 4, 2));
  }
  const std::string path = dir / "checkpoints/epoch=0-step=4.ckpt";
  ASSERT_TRUE(std::filesystem::exists(path)) << ::testing::PrintToString(volt::testing::files_under(dir.path()));
  auto o2 = quiet_options(dir.path());
  o2.max_epochs = 2;
  Trainer t2(o2);
  BoringModule resumed;
  t2.fit(resumed, loader, random_loader(8, 4, 2), path);
  EXPECT_EQ(resumed.train_steps, 4);
  EXPECT_EQ(t2.global_step(), 8);
  EXPECT_EQ(t2.current_epoch(), 2);
}

// With check_val_every_n_epoch unset, a count val_check_interval counts training batches
// over the whole fit (Lightning's total_batch_idx, which a checkpoint restores); Volt keeps
// the count in TrainerState::batches_seen and its checkpoints, so a resumed run keeps the schedule.
TEST(Loops, ResumedRunKeepsTheCrossEpochValidationSchedule) {
  ScratchDir dir;
  auto loader = random_loader(16, 4, 1);  // 4 batches an epoch
  auto val = random_loader(4, 4, 2);
  auto options = [&](int64_t epochs) {
    auto o = quiet_options(dir.path());
    o.max_epochs = epochs;
    o.check_val_every_n_epoch = std::nullopt;
    o.val_check_interval = volt::BatchLimit::count(3);
    return o;
  };
  const std::string path = dir / "one_epoch.ckpt";
  {
    BoringModule m;
    auto spy = std::make_shared<ValidationSpy>();
    Trainer t1(options(1), {spy});
    t1.fit(m, loader, val);
    ASSERT_EQ(spy->starts.size(), 1u);
    EXPECT_EQ(spy->starts[0].global_step, 3);
    t1.save_checkpoint(path);
  }
  BoringModule m;
  auto spy = std::make_shared<ValidationSpy>();
  Trainer t2(options(2), {spy});
  t2.fit(m, loader, val, path);
  ASSERT_EQ(spy->starts.size(), 1u);
  EXPECT_EQ(spy->starts[0].global_step, 6);  // training batch 6 of the fit
}

// --- EarlyStopping and ModelCheckpoint in a fit ---

/// val_loss is the same every validation: it never improves after the first.
class FlatValidationModule : public BoringModule {
 public:
  void validation_step(Batch& batch, StepContext& ctx) override {
    ++val_steps;
    (void)batch;
    ctx.log("val_loss", 1.0);
  }
};

TEST(Loops, EarlyStoppingStopsAfterPatiencePlusOneValidationsWithoutImprovement) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  o.num_sanity_val_steps = 2;  // not counted by EarlyStopping
  volt::callbacks::EarlyStopping::Options es;
  es.monitor = "val_loss";
  es.patience = 2;
  auto early = std::make_shared<volt::callbacks::EarlyStopping>(es);
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {early, spy});
  FlatValidationModule m;
  trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
  EXPECT_EQ(spy->starts.size(), 3u);
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(m.train_steps, 12);
  EXPECT_EQ(early->stopped_epoch(), 2);
  EXPECT_TRUE(contains(trainer.state().stop_reason, "did not improve")) << trainer.state().stop_reason;
}

// As TrainerFlags.MinEpochsDefersAnEarlyStopRequestUntilReached: a stop requested before
// min_epochs stands, and training stops once min_epochs is reached (as in Lightning).
TEST(Loops, EarlyStoppingBeforeMinEpochsStopsOnceMinEpochsIsReached) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 10;
  o.min_epochs = 4;
  volt::callbacks::EarlyStopping::Options es;
  es.monitor = "val_loss";
  es.patience = 1;  // asks to stop at the second validation (epoch index 1)
  auto early = std::make_shared<volt::callbacks::EarlyStopping>(es);
  Trainer trainer(o, {early});
  FlatValidationModule m;
  trainer.fit(m, random_loader(8, 4, 1), random_loader(8, 4, 2));
  // Lightning moves stopped_epoch to every check that asks to stop again: the last is epoch 3.
  EXPECT_EQ(early->stopped_epoch(), 3);
  EXPECT_EQ(trainer.current_epoch(), 4);
  EXPECT_EQ(m.train_steps, 8);
}

/// train_loss becomes NaN at the 5th optimizer step (the batch computed at global_step 4).
class NanAtStepFiveModule : public BoringModule {
 public:
  at::Tensor training_step(Batch& batch, StepContext& ctx) override {
    ++train_steps;
    at::Tensor loss = loss_of(batch);
    if (ctx.global_step() == 4) loss = loss * std::numeric_limits<double>::quiet_NaN();
    ctx.log("train_loss", loss);
    return loss;
  }
};

TEST(Loops, EarlyStoppingWithCheckFiniteStopsAtTheStepTheLossBecameNaN) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 3;
  volt::callbacks::EarlyStopping::Options es;
  es.monitor = "train_loss";
  es.check_finite = true;
  auto early = std::make_shared<volt::callbacks::EarlyStopping>(es);
  Trainer trainer(o, {early});
  NanAtStepFiveModule m;
  trainer.fit(m, random_loader(32, 4, 1));  // 8 batches an epoch
  EXPECT_EQ(m.train_steps, 5);
  EXPECT_EQ(trainer.global_step(), 5);
  EXPECT_EQ(trainer.current_epoch(), 1);
  const std::string& reason = trainer.state().stop_reason;
  EXPECT_TRUE(contains(reason, "train_loss = nan")) << reason;
  EXPECT_TRUE(contains(reason, "global step 5")) << reason;
  EXPECT_TRUE(contains(reason, "epoch 0")) << reason;
}

TEST(Loops, ModelCheckpointWithAMisspelledMonitorFailsAfterTheFirstValidationListingLoggedKeys) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  o.num_sanity_val_steps = 2;  // the sanity check must not trigger it
  volt::callbacks::ModelCheckpoint::Options mo;
  mo.monitor = "val_los";
  auto spy = std::make_shared<ValidationSpy>();
  Trainer trainer(o, {std::make_shared<volt::callbacks::ModelCheckpoint>(mo), spy});
  BoringModule m;
  try {
    trainer.fit(m, random_loader(16, 4, 1), random_loader(8, 4, 2));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "'val_los'")) << what;
    EXPECT_TRUE(contains(what, "val_loss")) << what;
    EXPECT_TRUE(contains(what, "train_loss")) << what;
  }
  EXPECT_EQ(spy->sanity_runs, 1);
  EXPECT_EQ(spy->starts.size(), 1u);
  EXPECT_EQ(m.train_steps, 4);
  EXPECT_EQ(volt::testing::files_under(dir.path()), std::vector<std::string>{});
}

TEST(Loops, ModelCheckpointMonitoringValLossKeepsTheBest) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  o.max_epochs = 3;
  volt::callbacks::ModelCheckpoint::Options mo;
  mo.monitor = "val_loss";
  mo.filename = "{epoch}-{val_loss:.3f}";
  auto ckpt = std::make_shared<volt::callbacks::ModelCheckpoint>(mo);
  Trainer trainer(o, {ckpt});
  BoringModule m;
  trainer.fit(m, random_loader(32, 4, 1), random_loader(32, 4, 1));  // validate on the training data
  ASSERT_TRUE(ckpt->best_model_score().has_value());
  EXPECT_EQ(volt::testing::files_under(dir.path()).size(), 1u);
  EXPECT_TRUE(contains(trainer.best_model_path(), dir / "checkpoints/epoch=")) << trainer.best_model_path();
  // Validating the best checkpoint reproduces its score.
  BoringModule fresh;
  const MetricMap metrics = trainer.validate(fresh, random_loader(32, 4, 1), "best");
  EXPECT_NEAR(metrics.at("val_loss"), *ckpt->best_model_score(), 1e-6);
}

}  // namespace
