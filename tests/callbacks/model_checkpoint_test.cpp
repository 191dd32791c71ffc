#include "volt/callbacks/model_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/fake_trainer_view.h"
#include "volt/core/error.h"

namespace {

namespace fs = std::filesystem;
using volt::ConfigError;
using volt::MetricMap;
using volt::TrainerFn;
using volt::callbacks::ModelCheckpoint;
using volt::testing::FakeTrainerView;

// A directory name that does not exist in the test's working directory, so the version
// counter only sees names the callback saved itself.
const std::string kDir = "volt-model-checkpoint-test-dir";

std::string in_dir(const std::string& name) {
  return (fs::path(kDir) / name).string();
}

FakeTrainerView ckpt_fitting_view(int64_t num_val_batches = 4) {
  FakeTrainerView view;
  view.state_.fn = TrainerFn::kFitting;
  view.state_.num_val_batches = num_val_batches;
  return view;
}

ModelCheckpoint::Options options_in_dir() {
  ModelCheckpoint::Options o;
  o.dirpath = kDir;
  return o;
}

// The end of one training epoch with validation, in Lightning 2.x's order: validation
// end, then train epoch end.
void ckpt_end_epoch(ModelCheckpoint& cb, FakeTrainerView& view, int64_t epoch, int64_t step,
               MetricMap metrics = {}) {
  view.state_.current_epoch = epoch;
  view.state_.global_step = step;
  view.callback_metrics_ = std::move(metrics);
  cb.on_validation_end(view);
  cb.on_train_epoch_end(view);
}

void end_batch(ModelCheckpoint& cb, FakeTrainerView& view, int64_t step) {
  view.state_.global_step = step;
  cb.on_train_batch_end(view, at::Tensor(), volt::Batch(), 0);
}

std::vector<std::string> saved_paths(const FakeTrainerView& view) {
  std::vector<std::string> paths;
  for (const auto& [path, weights_only] : view.saved_) paths.push_back(path);
  return paths;
}

std::string ckpt_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

// --- file names ---

TEST(ModelCheckpoint, DefaultFilenameIsEpochAndStep) {
  ModelCheckpoint cb(options_in_dir());
  EXPECT_EQ(cb.format_checkpoint_name({}, 3, 1200), in_dir("epoch=3-step=1200.ckpt"));
  EXPECT_EQ(cb.format_checkpoint_name({}, 3, 1200, 2), in_dir("epoch=3-step=1200-v2.ckpt"));
}

TEST(ModelCheckpoint, RendersMetricsWithPythonFormatSpecs) {
  auto o = options_in_dir();
  o.filename = "{epoch:03d}-{val_loss:.2f}";
  ModelCheckpoint cb(o);
  EXPECT_EQ(cb.format_checkpoint_name({{"val_loss", 0.1234}}, 3, 1200),
            in_dir("epoch=003-val_loss=0.12.ckpt"));

  o.filename = "model/{step:06d}_{val_acc}_{lr:.1e}_{val_acc:08.3f}";
  o.auto_insert_metric_name = false;
  ModelCheckpoint plain(o);
  EXPECT_EQ(plain.format_checkpoint_name({{"val_acc", 0.5}, {"lr", 0.00012}}, 0, 42),
            in_dir("model/000042_0.5_1.2e-04_0000.500.ckpt"));
}

TEST(ModelCheckpoint, PrintsDoublesWithoutASpecLikePythonRepr) {
  auto o = options_in_dir();
  o.filename = "{a}-{b}-{c}-{d}-{e}";
  o.auto_insert_metric_name = false;
  ModelCheckpoint cb(o);
  const MetricMap m{{"a", 0.1}, {"b", 2.0}, {"c", 1e-5}, {"d", 123.456},
                    {"e", std::numeric_limits<double>::quiet_NaN()}};
  EXPECT_EQ(cb.format_checkpoint_name(m, 0, 0), in_dir("0.1-2.0-1e-05-123.456-nan.ckpt"));
}

TEST(ModelCheckpoint, LoggedEpochMetricIsFormattedAsAnInteger) {
  ModelCheckpoint cb(options_in_dir());
  EXPECT_EQ(cb.format_checkpoint_name({{"epoch", 7.0}}, 3, 10), in_dir("epoch=7-step=10.ckpt"));
}

TEST(ModelCheckpoint, MissingFilenameKeyThrowsNamingTheKeyAndTheLoggedKeys) {
  auto o = options_in_dir();
  o.filename = "{epoch}-{val_acc:.2f}";
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const std::string msg =
      ckpt_error_of([&] { ckpt_end_epoch(cb, view, 0, 10, {{"train_loss", 1}, {"val_loss", 2}}); });
  EXPECT_NE(msg.find("'val_acc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[train_loss, val_loss]"), std::string::npos) << msg;
  EXPECT_TRUE(view.saved_.empty());
}

TEST(ModelCheckpoint, IntegerSpecOnAFractionalMetricThrows) {
  auto o = options_in_dir();
  o.filename = "{val_acc:03d}";
  ModelCheckpoint cb(o);
  EXPECT_THROW(cb.format_checkpoint_name({{"val_acc", 0.5}}, 0, 0), ConfigError);
  EXPECT_EQ(cb.format_checkpoint_name({{"val_acc", 3.0}}, 0, 0), in_dir("val_acc=003.ckpt"));
}

TEST(ModelCheckpoint, RejectsUnsupportedFormatSpecsAtConstruction) {
  for (const char* bad : {"{val_loss:>8}", "{val_loss:.2x}", "{epoch:.2d}", "{epoch", "{}"}) {
    auto o = options_in_dir();
    o.filename = bad;
    EXPECT_THROW(ModelCheckpoint cb(o), ConfigError) << bad;
  }
}

// The version counter counts a name as taken when this callback saved it (and has not
// removed it) or when the file exists on disk (checked by rank 0).
TEST(ModelCheckpoint, AppendsVersionWhenTheNameWasAlreadySaved) {
  auto o = options_in_dir();
  o.filename = "{epoch}";
  o.every_n_train_steps = 5;
  o.save_top_k = -1;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  end_batch(cb, view, 5);
  end_batch(cb, view, 10);
  end_batch(cb, view, 15);
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=0.ckpt"),
                                                          in_dir("epoch=0-v1.ckpt"),
                                                          in_dir("epoch=0-v2.ckpt")}));
}

TEST(ModelCheckpoint, AppendsVersionWhenTheFileExistsOnDisk) {
  const fs::path dir = fs::temp_directory_path() / "volt-model-checkpoint-version-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream((dir / "epoch=0-step=10.ckpt").string()) << "old run";

  ModelCheckpoint::Options o;
  o.dirpath = dir.string();
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 10);
  ASSERT_EQ(view.saved_.size(), 1u);
  EXPECT_EQ(view.saved_[0].first, (dir / "epoch=0-step=10-v1.ckpt").string());

  o.enable_version_counter = false;
  ModelCheckpoint overwrite(o);
  auto view2 = ckpt_fitting_view();
  ckpt_end_epoch(overwrite, view2, 0, 10);
  ASSERT_EQ(view2.saved_.size(), 1u);
  EXPECT_EQ(view2.saved_[0].first, (dir / "epoch=0-step=10.ckpt").string());
  fs::remove_all(dir);
}

TEST(ModelCheckpoint, DefaultDirpathIsUnderTheLoggerOrTheRootDir) {
  ModelCheckpoint no_logger;
  auto view = ckpt_fitting_view();
  view.state_.default_root_dir = "runs";
  no_logger.setup(view, volt::Stage::kFit);
  EXPECT_EQ(no_logger.dirpath(), (fs::path("runs") / "checkpoints").string());

  ModelCheckpoint with_logger;
  view.has_loggers_ = true;
  view.log_dir_ = "runs/lightning_logs/version_3";
  with_logger.setup(view, volt::Stage::kFit);
  EXPECT_EQ(with_logger.dirpath(),
            (fs::path("runs/lightning_logs/version_3") / "checkpoints").string());
}

// --- what is kept ---

TEST(ModelCheckpoint, KeepsTopKAndRemovesTheWorst) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_top_k = 2;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const std::vector<double> losses = {0.5, 0.4, 0.45, 0.6, 0.3};
  for (int64_t e = 0; e < 5; ++e) ckpt_end_epoch(cb, view, e, 10 * (e + 1), {{"val_loss", losses[e]}});

  const auto p = [](int e) { return in_dir("epoch=" + std::to_string(e) + "-step=" +
                                           std::to_string(10 * (e + 1)) + ".ckpt"); };
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{p(0), p(1), p(2), p(4)}));
  EXPECT_EQ(view.removed_, (std::vector<std::string>{p(0), p(2)}));
  EXPECT_EQ(cb.best_model_path(), p(4));
  EXPECT_DOUBLE_EQ(*cb.best_model_score(), 0.3);
  EXPECT_EQ(cb.kth_best_model_path(), p(1));
  EXPECT_DOUBLE_EQ(*cb.kth_value(), 0.4);
  EXPECT_EQ(cb.best_k_models(), (std::map<std::string, double>{{p(1), 0.4}, {p(4), 0.3}}));
}

TEST(ModelCheckpoint, KeepsTopKInMaxMode) {
  auto o = options_in_dir();
  o.monitor = "val_acc";
  o.mode = "max";
  o.save_top_k = 2;
  o.filename = "{epoch}";
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const std::vector<double> acc = {0.5, 0.7, 0.6, 0.4, 0.9};
  for (int64_t e = 0; e < 5; ++e) ckpt_end_epoch(cb, view, e, e + 1, {{"val_acc", acc[e]}});
  EXPECT_EQ(view.removed_, (std::vector<std::string>{in_dir("epoch=0.ckpt"),
                                                     in_dir("epoch=2.ckpt")}));
  EXPECT_EQ(cb.best_model_path(), in_dir("epoch=4.ckpt"));
  EXPECT_DOUBLE_EQ(*cb.best_model_score(), 0.9);
  EXPECT_EQ(cb.best_k_models().size(), 2u);
}

TEST(ModelCheckpoint, NaNScoresCountAsTheWorst) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_top_k = 2;
  o.filename = "{epoch}";
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ckpt_end_epoch(cb, view, 0, 1, {{"val_loss", nan}});
  ckpt_end_epoch(cb, view, 1, 2, {{"val_loss", 0.5}});
  ckpt_end_epoch(cb, view, 2, 3, {{"val_loss", nan}});  // never displaces a real score
  ckpt_end_epoch(cb, view, 3, 4, {{"val_loss", 0.4}});
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=0.ckpt"),
                                                         in_dir("epoch=1.ckpt"),
                                                         in_dir("epoch=3.ckpt")}));
  EXPECT_EQ(view.removed_, (std::vector<std::string>{in_dir("epoch=0.ckpt")}));
  EXPECT_EQ(cb.best_model_path(), in_dir("epoch=3.ckpt"));
}

TEST(ModelCheckpoint, SaveTopKMinusOneKeepsEveryCheckpoint) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_top_k = -1;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  for (int64_t e = 0; e < 4; ++e) ckpt_end_epoch(cb, view, e, e + 1, {{"val_loss", 1.0 + e}});
  EXPECT_EQ(view.saved_.size(), 4u);
  EXPECT_TRUE(view.removed_.empty());
  EXPECT_EQ(cb.best_k_models().size(), 4u);
  EXPECT_EQ(cb.best_model_path(), in_dir("epoch=0-step=1.ckpt"));
}

TEST(ModelCheckpoint, WithoutMonitorKeepsOnlyTheLatest) {
  ModelCheckpoint cb(options_in_dir());
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 10);
  ckpt_end_epoch(cb, view, 1, 20);
  EXPECT_EQ(view.removed_, (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt")}));
  EXPECT_EQ(cb.best_model_path(), in_dir("epoch=1-step=20.ckpt"));
  EXPECT_FALSE(cb.best_model_score().has_value());
}

TEST(ModelCheckpoint, SaveTopKZeroSavesNothingButSaveLastStillWrites) {
  auto o = options_in_dir();
  o.save_top_k = 0;
  o.save_last = true;
  o.monitor = "val_loss";
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 10, {{"val_loss", 1}});
  ckpt_end_epoch(cb, view, 1, 20, {{"val_loss", 0.5}});
  EXPECT_EQ(saved_paths(view),
            (std::vector<std::string>{in_dir("last.ckpt"), in_dir("last.ckpt")}));
  EXPECT_TRUE(view.removed_.empty());
  EXPECT_TRUE(cb.best_model_path().empty());
  EXPECT_EQ(cb.last_model_path(), in_dir("last.ckpt"));
}

TEST(ModelCheckpoint, SaveLastWritesLastCkptBesideTheTopK) {
  auto o = options_in_dir();
  o.save_last = true;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 10);
  ckpt_end_epoch(cb, view, 1, 20);
  EXPECT_EQ(saved_paths(view),
            (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt"), in_dir("last.ckpt"),
                                      in_dir("epoch=1-step=20.ckpt"), in_dir("last.ckpt")}));
  EXPECT_EQ(view.removed_, (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt")}));
}

TEST(ModelCheckpoint, PassesSaveWeightsOnlyToTheView) {
  auto o = options_in_dir();
  o.save_weights_only = true;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 10);
  ASSERT_EQ(view.saved_.size(), 1u);
  EXPECT_TRUE(view.saved_[0].second);
}

// --- when it saves ---

TEST(ModelCheckpoint, SavesEveryNTrainStepsAndNotTwiceForTheSameStep) {
  auto o = options_in_dir();
  o.every_n_train_steps = 3;
  o.save_top_k = -1;
  ModelCheckpoint cb(o);
  EXPECT_EQ(cb.every_n_epochs(), 0);
  auto view = ckpt_fitting_view();
  for (int64_t step : {0, 1, 2, 3, 3, 4, 5, 6, 7}) end_batch(cb, view, step);
  ckpt_end_epoch(cb, view, 0, 7);  // epoch saving is off with a step interval
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=0-step=3.ckpt"),
                                                         in_dir("epoch=0-step=6.ckpt")}));
}

TEST(ModelCheckpoint, EveryNEpochsTwoSavesEverySecondEpoch) {
  auto o = options_in_dir();
  o.every_n_epochs = 2;
  o.save_top_k = -1;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  for (int64_t e = 0; e < 4; ++e) ckpt_end_epoch(cb, view, e, 10 * (e + 1));
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=1-step=20.ckpt"),
                                                         in_dir("epoch=3-step=40.ckpt")}));
}

// Lightning's default with validation batches: at train epoch end when validation runs
// once per epoch; after each validation when it runs several times per epoch or skips epochs.
TEST(ModelCheckpoint, SavesWhereLightningDoesDependingOnTheValidationSchedule) {
  ModelCheckpoint once(options_in_dir());
  auto view = ckpt_fitting_view(/*num_val_batches=*/4);
  view.state_.global_step = 10;
  once.on_validation_end(view);
  EXPECT_TRUE(view.saved_.empty());
  once.on_train_epoch_end(view);
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt")}));

  for (auto edit : std::vector<std::function<void(volt::TrainerState&)>>{
           [](volt::TrainerState& s) { s.val_check_interval = volt::BatchLimit::fraction(0.5); },
           [](volt::TrainerState& s) { s.check_val_every_n_epoch = 2; },
           [](volt::TrainerState& s) {
             s.check_val_every_n_epoch = 2;
             s.num_val_batches = 0;
           }}) {
    ModelCheckpoint after_validation(options_in_dir());
    auto view2 = ckpt_fitting_view(/*num_val_batches=*/4);
    edit(view2.state_);
    view2.state_.global_step = 5;
    after_validation.on_train_epoch_end(view2);
    EXPECT_TRUE(view2.saved_.empty());
    after_validation.on_validation_end(view2);
    EXPECT_EQ(saved_paths(view2), (std::vector<std::string>{in_dir("epoch=0-step=5.ckpt")}));
  }
}

TEST(ModelCheckpoint, SavesAtTrainEpochEndWhenThereIsNoValidation) {
  ModelCheckpoint cb(options_in_dir());
  auto view = ckpt_fitting_view(/*num_val_batches=*/0);
  view.state_.global_step = 10;
  cb.on_validation_end(view);
  EXPECT_TRUE(view.saved_.empty());
  cb.on_train_epoch_end(view);
  EXPECT_EQ(saved_paths(view), (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt")}));
}

TEST(ModelCheckpoint, SavesNothingDuringTheSanityCheckOrOutsideFit) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_last = true;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  view.state_.sanity_checking = true;
  ckpt_end_epoch(cb, view, 0, 0);  // no val_loss yet: no error either
  view.state_.sanity_checking = false;
  view.state_.fn = TrainerFn::kValidating;
  ckpt_end_epoch(cb, view, 0, 10, {{"val_loss", 1}});
  EXPECT_TRUE(view.saved_.empty());
}

TEST(ModelCheckpoint, SavesNothingBeforeTheFirstOptimizerStep) {
  ModelCheckpoint cb(options_in_dir());
  auto view = ckpt_fitting_view();
  ckpt_end_epoch(cb, view, 0, 0);
  EXPECT_TRUE(view.saved_.empty());
}

// --- errors ---

TEST(ModelCheckpoint, MissingMonitorThrowsListingTheLoggedKeys) {
  auto o = options_in_dir();
  o.monitor = "val_los";
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const std::string msg = ckpt_error_of([&] {
    ckpt_end_epoch(cb, view, 0, 10, {{"train_loss", 1}, {"val_acc", 0.5}, {"val_loss", 0.9}});
  });
  EXPECT_EQ(msg,
            "ModelCheckpoint(monitor='val_los') could not find 'val_los' among the logged "
            "metrics: [train_loss, val_acc, val_loss]. Log it with ctx.log(\"val_los\", ...) "
            "or fix monitor.");
}

TEST(ModelCheckpoint, MissingMonitorAtAStepSaveBeforeTheFirstEpochEndOnlySkips) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.every_n_train_steps = 2;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  view.callback_metrics_ = {{"train_loss", 1}};
  EXPECT_NO_THROW(end_batch(cb, view, 2));
  EXPECT_TRUE(view.saved_.empty());
  view.callback_metrics_ = {{"train_loss", 1}, {"val_loss", 0.5}};
  end_batch(cb, view, 4);
  EXPECT_EQ(view.saved_.size(), 1u);
}

TEST(ModelCheckpoint, RejectsInvalidOptionsWithAFix) {
  auto make = [](auto edit) {
    auto o = options_in_dir();
    edit(o);
    return ckpt_error_of([&] { ModelCheckpoint cb(o); });
  };
  using O = ModelCheckpoint::Options;
  EXPECT_NE(make([](O& o) { o.mode = "minimum"; }).find("mode='minimum'"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.save_top_k = -2; }).find("save_top_k=-2"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.every_n_train_steps = -1; }).find("every_n_train_steps=-1"),
            std::string::npos);
  EXPECT_NE(make([](O& o) { o.every_n_epochs = -1; }).find("every_n_epochs=-1"),
            std::string::npos);
  EXPECT_NE(make([](O& o) {
              o.every_n_epochs = 2;
              o.every_n_train_steps = 100;
            }).find("mutually exclusive"),
            std::string::npos);
  EXPECT_NE(make([](O& o) { o.save_top_k = 3; }).find("monitor"), std::string::npos);
  EXPECT_EQ(make([](O& o) {
              o.every_n_epochs = 0;
              o.every_n_train_steps = 100;
            }),
            "(no ConfigError)");
}

// --- state ---

TEST(ModelCheckpoint, StateKeyLooksLikeLightnings) {
  EXPECT_EQ(ModelCheckpoint().state_key(),
            "ModelCheckpoint{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0, "
            "'every_n_epochs': 1}");
  auto o = options_in_dir();
  o.monitor = "val_acc";
  o.mode = "max";
  o.every_n_train_steps = 50;
  EXPECT_EQ(ModelCheckpoint(o).state_key(),
            "ModelCheckpoint{'monitor': 'val_acc', 'mode': 'max', 'every_n_train_steps': 50, "
            "'every_n_epochs': 0}");
}

TEST(ModelCheckpoint, StateDictRoundTrips) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_top_k = 2;
  o.save_last = true;
  ModelCheckpoint cb(o);
  auto view = ckpt_fitting_view();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ckpt_end_epoch(cb, view, 0, 10, {{"val_loss", nan}});
  ckpt_end_epoch(cb, view, 1, 20, {{"val_loss", 0.5}});
  const nlohmann::json state = nlohmann::json::parse(cb.state_dict().dump());
  EXPECT_EQ(state.at("best_k_models").at(in_dir("epoch=0-step=10.ckpt")), "inf");

  ModelCheckpoint restored(o);
  restored.load_state_dict(state);
  EXPECT_EQ(restored.best_model_path(), cb.best_model_path());
  EXPECT_EQ(restored.best_model_score(), cb.best_model_score());
  EXPECT_EQ(restored.best_k_models(), cb.best_k_models());
  EXPECT_EQ(restored.kth_best_model_path(), cb.kth_best_model_path());
  EXPECT_EQ(restored.kth_value(), cb.kth_value());
  EXPECT_EQ(restored.last_model_path(), cb.last_model_path());
  EXPECT_EQ(restored.state_dict(), state);

  // The restored callback carries on: 0.4 displaces the inf entry.
  auto view2 = ckpt_fitting_view();
  ckpt_end_epoch(restored, view2, 2, 30, {{"val_loss", 0.4}});
  EXPECT_EQ(view2.removed_,
            (std::vector<std::string>{in_dir("epoch=0-step=10.ckpt")}));

  // Another directory: only best_model_path comes back (Lightning's rule).
  auto elsewhere = o;
  elsewhere.dirpath = "somewhere-else";
  ModelCheckpoint moved(elsewhere);
  moved.load_state_dict(state);
  EXPECT_EQ(moved.best_model_path(), cb.best_model_path());
  EXPECT_TRUE(moved.best_k_models().empty());
  EXPECT_TRUE(moved.last_model_path().empty());
}

TEST(ModelCheckpoint, StateLoadedBeforeSetupIsAppliedOnceDirpathIsKnown) {
  auto view = ckpt_fitting_view();
  view.state_.default_root_dir = kDir;
  ModelCheckpoint::Options o;
  o.monitor = "val_loss";
  ModelCheckpoint first(o);
  first.setup(view, volt::Stage::kFit);
  ckpt_end_epoch(first, view, 0, 10, {{"val_loss", 0.5}});

  ModelCheckpoint second(o);
  second.load_state_dict(first.state_dict());
  EXPECT_TRUE(second.best_k_models().empty());
  second.setup(view, volt::Stage::kFit);
  EXPECT_EQ(second.best_k_models(), first.best_k_models());
  EXPECT_EQ(second.best_model_score(), first.best_model_score());
}

// --- ranks ---

// Rank 0 in a two-process run, with a reduce that only records what rank 0 decided.
class RankZeroView : public FakeTrainerView {
 public:
  std::vector<bool> decisions_;
  bool reduce_boolean_decision(bool decision, bool) override {
    decisions_.push_back(decision);
    return decision;
  }
};

// Rank 1 of the same run: every reduce returns what rank 0 decided at that point.
class RankOneView : public FakeTrainerView {
 public:
  std::vector<bool> script_;
  std::vector<bool> contributed_;
  bool reduce_boolean_decision(bool decision, bool all) override {
    EXPECT_FALSE(all);
    contributed_.push_back(decision);
    return script_.at(contributed_.size() - 1);
  }
};

TEST(ModelCheckpoint, OtherRanksFollowRankZeroAndNeverRemove) {
  auto o = options_in_dir();
  o.monitor = "val_loss";
  o.save_top_k = 1;
  ModelCheckpoint rank0(o);
  ModelCheckpoint rank1(o);
  RankZeroView v0;
  RankOneView v1;
  v1.state_.is_global_zero = false;
  v0.state_.world_size = v1.state_.world_size = 2;
  // Unsynced metrics: rank 1 would rank the epochs the other way round.
  const std::vector<double> on0 = {0.5, 0.4, 0.6, 0.3};
  const std::vector<double> on1 = {0.3, 0.6, 0.4, 0.5};
  for (int64_t e = 0; e < 4; ++e) ckpt_end_epoch(rank0, v0, e, e + 1, {{"val_loss", on0[e]}});
  v1.script_ = v0.decisions_;
  for (int64_t e = 0; e < 4; ++e) ckpt_end_epoch(rank1, v1, e, e + 1, {{"val_loss", on1[e]}});

  EXPECT_EQ(saved_paths(v1), saved_paths(v0));
  EXPECT_EQ(rank1.best_model_path(), rank0.best_model_path());
  EXPECT_FALSE(v0.removed_.empty());
  EXPECT_TRUE(v1.removed_.empty());
  for (bool c : v1.contributed_) EXPECT_FALSE(c);
}

}  // namespace
