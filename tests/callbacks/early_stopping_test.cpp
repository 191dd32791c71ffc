#include "volt/callbacks/early_stopping.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/fake_trainer_view.h"
#include "volt/core/error.h"

namespace {

using volt::ConfigError;
using volt::MetricMap;
using volt::TrainerFn;
using volt::callbacks::EarlyStopping;
using volt::testing::FakeTrainerView;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

FakeTrainerView fitting_view(int64_t num_val_batches = 4) {
  FakeTrainerView view;
  view.state_.fn = TrainerFn::kFitting;
  view.state_.num_val_batches = num_val_batches;
  return view;
}

EarlyStopping::Options watch(const std::string& monitor) {
  EarlyStopping::Options o;
  o.monitor = monitor;
  return o;
}

// One epoch end with validation, in Lightning 2.x's order.
void end_epoch(EarlyStopping& cb, FakeTrainerView& view, int64_t epoch, MetricMap metrics) {
  view.state_.current_epoch = epoch;
  view.state_.global_step = 100 * (epoch + 1);
  view.callback_metrics_ = std::move(metrics);
  cb.on_validation_end(view);
  cb.on_train_epoch_end(view);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(EarlyStopping, StopsAfterPatienceChecksWithoutImprovement) {
  EarlyStopping cb(watch("val_loss"));
  auto view = fitting_view();
  const std::vector<double> losses = {1.0, 0.9, 0.95, 0.91, 0.92};
  for (int64_t e = 0; e < 5; ++e) {
    end_epoch(cb, view, e, {{"val_loss", losses[e]}});
    EXPECT_EQ(view.stop_reasons_.empty(), e < 4) << "epoch " << e;
  }
  EXPECT_EQ(cb.wait_count(), 3);
  EXPECT_DOUBLE_EQ(cb.best_score(), 0.9);
  EXPECT_EQ(cb.stopped_epoch(), 4);
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_EQ(view.stop_reasons_[0],
            "Monitored metric val_loss did not improve in the last 3 records. Best score: 0.9. "
            "Signaling Trainer to stop.");
  EXPECT_EQ(cb.stopping_reason(), view.stop_reasons_[0]);
}

TEST(EarlyStopping, MinDeltaDecidesWhatCountsAsAnImprovement) {
  auto o = watch("val_loss");
  o.min_delta = 0.1;
  o.patience = 2;
  EarlyStopping cb(o);
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_loss", 1.0}});
  end_epoch(cb, view, 1, {{"val_loss", 0.95}});  // better, but by less than min_delta
  EXPECT_EQ(cb.wait_count(), 1);
  EXPECT_DOUBLE_EQ(cb.best_score(), 1.0);
  end_epoch(cb, view, 2, {{"val_loss", 0.85}});  // better by 0.15
  EXPECT_EQ(cb.wait_count(), 0);
  EXPECT_DOUBLE_EQ(cb.best_score(), 0.85);
  end_epoch(cb, view, 3, {{"val_loss", 0.80}});
  EXPECT_TRUE(view.stop_reasons_.empty());
  end_epoch(cb, view, 4, {{"val_loss", 0.79}});
  EXPECT_EQ(view.stop_reasons_.size(), 1u);
}

TEST(EarlyStopping, ModeMaxTreatsHigherAsBetter) {
  auto o = watch("val_acc");
  o.mode = "max";
  o.patience = 1;
  EarlyStopping cb(o);
  EXPECT_EQ(cb.best_score(), -kInf);
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_acc", 0.5}});
  end_epoch(cb, view, 1, {{"val_acc", 0.7}});
  EXPECT_DOUBLE_EQ(cb.best_score(), 0.7);
  EXPECT_TRUE(view.stop_reasons_.empty());
  end_epoch(cb, view, 2, {{"val_acc", 0.6}});
  EXPECT_EQ(view.stop_reasons_.size(), 1u);
}

TEST(EarlyStopping, StoppingThresholdStopsOnceTheMetricIsBetter) {
  auto o = watch("val_loss");
  o.stopping_threshold = 0.1;
  EarlyStopping cb(o);
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_loss", 0.5}});
  end_epoch(cb, view, 1, {{"val_loss", 0.2}});
  EXPECT_TRUE(view.stop_reasons_.empty());
  end_epoch(cb, view, 2, {{"val_loss", 0.05}});
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_EQ(view.stop_reasons_[0],
            "Stopping threshold reached: val_loss = 0.05 < 0.1. Signaling Trainer to stop.");
}

TEST(EarlyStopping, DivergenceThresholdStopsOnceTheMetricIsWorse) {
  auto o = watch("val_loss");
  o.divergence_threshold = 5.0;
  EarlyStopping cb(o);
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_loss", 1.0}});
  EXPECT_TRUE(view.stop_reasons_.empty());
  end_epoch(cb, view, 1, {{"val_loss", 6.0}});
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_EQ(view.stop_reasons_[0],
            "Divergence threshold reached: val_loss = 6 > 5. Signaling Trainer to stop.");
}

TEST(EarlyStopping, NaNAtTrainBatchEndStopsAndNamesTheStep) {
  EarlyStopping cb(watch("train_loss"));
  auto view = fitting_view(/*num_val_batches=*/0);
  view.state_.current_epoch = 1;
  view.callback_metrics_ = {{"train_loss", 0.3121}};
  cb.on_train_epoch_end(view);
  EXPECT_DOUBLE_EQ(cb.best_score(), 0.3121);

  view.state_.current_epoch = 2;
  view.state_.global_step = 1233;
  cb.on_train_batch_end(view, at::Tensor(), volt::Batch(), 0);
  EXPECT_TRUE(view.stop_reasons_.empty());
  view.state_.global_step = 1234;
  view.callback_metrics_ = {{"train_loss", kNaN}};
  cb.on_train_batch_end(view, at::Tensor(), volt::Batch(), 1);
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_EQ(view.stop_reasons_[0],
            "Monitored metric train_loss = nan is not finite at epoch 2, global step 1234. "
            "Previous best score: 0.3121. Signaling Trainer to stop.");
  EXPECT_EQ(cb.stopped_epoch(), 2);

  // The epoch end that follows sees the same NaN but does not ask again.
  cb.on_train_epoch_end(view);
  EXPECT_EQ(view.stop_reasons_.size(), 1u);
}

TEST(EarlyStopping, InfiniteMetricAtValidationStops) {
  EarlyStopping cb(watch("val_loss"));
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_loss", kInf}});
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_NE(view.stop_reasons_[0].find("val_loss = inf is not finite at epoch 0, global step "
                                       "100. There is no previous best score."),
            std::string::npos)
      << view.stop_reasons_[0];
}

TEST(EarlyStopping, BatchEndCheckIsOffWithoutCheckFinite) {
  auto o = watch("train_loss");
  o.check_finite = false;
  EarlyStopping cb(o);
  auto view = fitting_view();
  view.callback_metrics_ = {{"train_loss", kNaN}};
  cb.on_train_batch_end(view, at::Tensor(), volt::Batch(), 0);
  EXPECT_TRUE(view.stop_reasons_.empty());
}

TEST(EarlyStopping, StrictMissingMonitorThrowsListingTheLoggedKeys) {
  EarlyStopping cb(watch("val_los"));
  auto view = fitting_view();
  const std::string msg =
      error_of([&] { end_epoch(cb, view, 0, {{"train_loss", 1}, {"val_loss", 0.9}}); });
  EXPECT_NE(msg.find("EarlyStopping(monitor='val_los') could not find 'val_los' among the "
                     "logged metrics: [train_loss, val_loss]"),
            std::string::npos)
      << msg;

  auto o = watch("val_los");
  o.strict = false;
  EarlyStopping lenient(o);
  EXPECT_NO_THROW(end_epoch(lenient, view, 0, {{"train_loss", 1}}));
  EXPECT_EQ(lenient.wait_count(), 0);
}

TEST(EarlyStopping, IsNotCheckedDuringTheSanityCheckOrOutsideFit) {
  EarlyStopping cb(watch("val_loss"));
  auto view = fitting_view();
  view.state_.sanity_checking = true;
  EXPECT_NO_THROW(end_epoch(cb, view, 0, {}));
  end_epoch(cb, view, 0, {{"val_loss", kNaN}});
  view.state_.sanity_checking = false;
  view.state_.fn = TrainerFn::kValidating;
  end_epoch(cb, view, 0, {{"val_loss", kNaN}});
  EXPECT_TRUE(view.stop_reasons_.empty());
  EXPECT_EQ(cb.wait_count(), 0);
}

// Lightning's default: at train epoch end when validation runs once per epoch
// (val_check_interval 1.0 or 1, check_val_every_n_epoch 1), with or without val batches;
// after each validation otherwise.
TEST(EarlyStopping, ChecksAtTrainEpochEndWhenValidationRunsOncePerEpochElseAfterValidation) {
  auto o = watch("loss");
  EarlyStopping once_per_epoch(o);
  auto view = fitting_view(/*num_val_batches=*/4);
  view.callback_metrics_ = {{"loss", kInf}};
  once_per_epoch.on_validation_end(view);
  EXPECT_TRUE(view.stop_reasons_.empty());
  once_per_epoch.on_train_epoch_end(view);
  EXPECT_EQ(view.stop_reasons_.size(), 1u);

  for (auto edit : std::vector<std::function<void(volt::TrainerState&)>>{
           [](volt::TrainerState& s) { s.val_check_interval = volt::BatchLimit::fraction(0.5); },
           [](volt::TrainerState& s) { s.val_check_interval = volt::BatchLimit::count(3); },
           [](volt::TrainerState& s) { s.check_val_every_n_epoch = 2; },
           [](volt::TrainerState& s) { s.check_val_every_n_epoch = std::nullopt; }}) {
    EarlyStopping after_validation(o);
    auto view2 = fitting_view(/*num_val_batches=*/4);
    edit(view2.state_);
    view2.callback_metrics_ = {{"loss", kInf}};
    after_validation.on_train_epoch_end(view2);
    EXPECT_TRUE(view2.stop_reasons_.empty());
    after_validation.on_validation_end(view2);
    EXPECT_EQ(view2.stop_reasons_.size(), 1u);
  }

  // A count of 1 batch is Lightning's `val_check_interval == 1.0` too.
  EarlyStopping count_one(o);
  auto view3 = fitting_view(/*num_val_batches=*/0);
  view3.state_.val_check_interval = volt::BatchLimit::count(1);
  view3.callback_metrics_ = {{"loss", kInf}};
  count_one.on_train_epoch_end(view3);
  EXPECT_EQ(view3.stop_reasons_.size(), 1u);
}

// A rank whose peers asked to stop: the reduced decision says stop although this rank's
// metric improved.
class PeerStopsView : public FakeTrainerView {
 public:
  bool reduce_boolean_decision(bool, bool all) override {
    EXPECT_FALSE(all);
    return true;
  }
};

TEST(EarlyStopping, StopsWhenAnyRankAsksToStop) {
  EarlyStopping cb(watch("val_loss"));
  PeerStopsView view;
  view.state_.current_epoch = 3;
  view.state_.global_step = 40;
  view.callback_metrics_ = {{"val_loss", 0.1}};
  cb.on_train_epoch_end(view);
  ASSERT_EQ(view.stop_reasons_.size(), 1u);
  EXPECT_NE(view.stop_reasons_[0].find("another process at epoch 3, global step 40"),
            std::string::npos);
  EXPECT_EQ(cb.stopped_epoch(), 3);
}

TEST(EarlyStopping, StateDictRoundTrips) {
  auto o = watch("val_loss");
  o.patience = 5;
  EarlyStopping fresh(o);
  const nlohmann::json initial = nlohmann::json::parse(fresh.state_dict().dump());
  EXPECT_EQ(initial.at("best_score"), "inf");

  EarlyStopping cb(o);
  auto view = fitting_view();
  end_epoch(cb, view, 0, {{"val_loss", 0.5}});
  end_epoch(cb, view, 1, {{"val_loss", 0.6}});
  const nlohmann::json state = nlohmann::json::parse(cb.state_dict().dump());

  EarlyStopping restored(watch("val_loss"));
  restored.load_state_dict(state);
  EXPECT_EQ(restored.wait_count(), 1);
  EXPECT_DOUBLE_EQ(restored.best_score(), 0.5);
  EXPECT_EQ(restored.options().patience, 5);
  EXPECT_EQ(restored.state_dict(), state);

  restored.load_state_dict(initial);
  EXPECT_EQ(restored.best_score(), kInf);
}

TEST(EarlyStopping, StateKeyLooksLikeLightnings) {
  auto o = watch("val_acc");
  o.mode = "max";
  EXPECT_EQ(EarlyStopping(o).state_key(), "EarlyStopping{'monitor': 'val_acc', 'mode': 'max'}");
}

TEST(EarlyStopping, RejectsInvalidOptionsWithAFix) {
  auto make = [](auto edit) {
    auto o = watch("val_loss");
    edit(o);
    return error_of([&] { EarlyStopping cb(o); });
  };
  using O = EarlyStopping::Options;
  EXPECT_NE(make([](O& o) { o.monitor = ""; }).find("monitor is empty"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.mode = "minimize"; }).find("mode='minimize'"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.patience = -1; }).find("patience=-1"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.min_delta = -0.1; }).find("min_delta=-0.1"), std::string::npos);
  EXPECT_NE(make([](O& o) { o.stopping_threshold = kNaN; }).find("stopping_threshold=nan"),
            std::string::npos);
  EXPECT_NE(make([](O& o) {
              o.stopping_threshold = 2.0;
              o.divergence_threshold = 1.0;
            }).find("can never run"),
            std::string::npos);
}

}  // namespace
