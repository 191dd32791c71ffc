#include "volt/callbacks/progress_bar.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/expect.h"

#include "support/fake_trainer_view.h"
#include "volt/core/error.h"

namespace {

using volt::callbacks::ProgressBar;
using volt::callbacks::ProgressBarOptions;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

using volt::testing::contains;

class ProgressBarTest : public ::testing::Test {
 protected:
  ProgressBarTest() {
    view_.state_.fn = volt::TrainerFn::kFitting;
    view_.state_.stage = volt::RunningStage::kTraining;
    view_.state_.current_epoch = 2;
    view_.state_.max_epochs = 10;
    view_.state_.num_training_batches = 20;
    view_.progress_bar_metrics_ = {{"loss", 0.41234}, {"val_acc", 0.8712}};
  }

  ProgressBarOptions options(bool tty) {
    ProgressBarOptions o;
    o.out = &out_;
    o.force_tty = tty;
    o.min_redraw_seconds = 0;
    return o;
  }

  void run_batches(ProgressBar& bar, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) bar.on_train_batch_end(view_, at::Tensor(), {}, i);
  }

  void run_epoch(ProgressBar& bar) {
    bar.on_train_epoch_start(view_);
    run_batches(bar, 0, view_.state_.num_training_batches);
    bar.on_train_epoch_end(view_);
  }

  void run_validation(ProgressBar& bar, int64_t batches) {
    view_.state_.num_eval_batches = batches;
    bar.on_validation_start(view_);
    for (int64_t i = 0; i < batches; ++i) bar.on_validation_batch_end(view_, {}, i);
    bar.on_validation_end(view_);
  }

  // Terminal frames: the text drawn after each '\r', without the clear-to-end code.
  std::vector<std::string> frames() const {
    std::vector<std::string> out;
    for (const auto& part : split(out_.str(), '\r')) {
      if (part.empty()) continue;
      std::string frame = part.substr(0, part.find("\x1b[K"));
      if (!frame.empty()) out.push_back(frame);
    }
    return out;
  }

  volt::testing::FakeTrainerView view_;
  std::ostringstream out_;
};

TEST_F(ProgressBarTest, TerminalRedrawsOneLineWithPercentCountsRateAndMetrics) {
  ProgressBar bar(options(true));
  EXPECT_TRUE(bar.is_tty());
  run_epoch(bar);
  const std::string text = out_.str();
  EXPECT_EQ(count(text, "\n"), 1u) << "one line per epoch, ended at epoch end";
  EXPECT_EQ(text.back(), '\n');
  const auto f = frames();
  ASSERT_EQ(f.size(), 22u) << "0%, one per batch, and the final redraw";
  EXPECT_EQ(f[0].rfind("Epoch 2/9   0%|          | 0/20 [00:00<", 0), 0u) << f[0];
  EXPECT_EQ(f[9].rfind("Epoch 2/9  45%|████▌     | 9/20 [", 0), 0u) << f[9];
  EXPECT_TRUE(contains(f[9], "it/s, loss=0.412, val_acc=0.871]")) << f[9];
  EXPECT_EQ(f[20].rfind("Epoch 2/9 100%|██████████| 20/20 [", 0), 0u) << f[20];
  EXPECT_EQ(count(text, "\x1b[K"), 22u);
}

TEST_F(ProgressBarTest, TerminalWithoutMaxEpochsShowsEpochNumberOnly) {
  view_.state_.max_epochs = -1;
  ProgressBar bar(options(true));
  run_epoch(bar);
  EXPECT_EQ(frames().back().rfind("Epoch 2 100%|", 0), 0u) << frames().back();
}

TEST_F(ProgressBarTest, TerminalWithUnknownBatchCountShowsCountOnly) {
  view_.state_.num_training_batches = 0;
  ProgressBar bar(options(true));
  bar.on_train_epoch_start(view_);
  run_batches(bar, 0, 7);
  EXPECT_EQ(frames().back().rfind("Epoch 2/9 7it [", 0), 0u) << frames().back();
}

TEST_F(ProgressBarTest, TerminalRefreshRateDrawsEveryNthBatch) {
  auto o = options(true);
  o.refresh_rate = 5;
  ProgressBar bar(o);
  run_epoch(bar);
  const auto f = frames();
  ASSERT_EQ(f.size(), 6u) << "0%, batches 5, 10, 15, 20, epoch end";
  EXPECT_TRUE(contains(f[2], "| 10/20 [")) << f[2];
}

TEST_F(ProgressBarTest, TerminalMinRedrawIntervalStillDrawsLastBatch) {
  auto o = options(true);
  o.min_redraw_seconds = 3600;
  ProgressBar bar(o);
  run_epoch(bar);
  const auto f = frames();
  ASSERT_EQ(f.size(), 3u) << "0%, the last batch, epoch end";
  EXPECT_TRUE(contains(f[1], "| 20/20 [")) << f[1];
}

TEST_F(ProgressBarTest, TerminalValidationDuringFitDrawsBelowAndRemovesItsLine) {
  ProgressBar bar(options(true));
  bar.on_train_epoch_start(view_);
  run_batches(bar, 0, 10);
  const size_t before = out_.str().size();
  run_validation(bar, 4);
  const std::string val = out_.str().substr(before);
  EXPECT_EQ(val.rfind("\n\rValidation   0%|          | 0/4 [", 0), 0u) << val;
  EXPECT_TRUE(contains(val, "\rValidation 100%|██████████| 4/4 [")) << val;
  EXPECT_EQ(val.substr(val.size() - 7), "\r\x1b[K\x1b[A") << "cleared, back on the epoch line";
  run_batches(bar, 10, 20);
  bar.on_train_epoch_end(view_);
  EXPECT_EQ(count(out_.str(), "\n"), 2u);
}

TEST_F(ProgressBarTest, TerminalStandaloneValidationLeavesItsLine) {
  view_.state_.fn = volt::TrainerFn::kValidating;
  ProgressBar bar(options(true));
  run_validation(bar, 3);
  const std::string text = out_.str();
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(frames().back().rfind("Validation 100%|██████████| 3/3 [", 0), 0u) << text;
  EXPECT_FALSE(contains(text, "\x1b[A"));
}

TEST_F(ProgressBarTest, TerminalSanityCheckIsLabelledAndRemoved) {
  view_.state_.sanity_checking = true;
  ProgressBar bar(options(true));
  run_validation(bar, 2);
  EXPECT_TRUE(contains(out_.str(), "Sanity Checking 100%|")) << out_.str();
  EXPECT_EQ(out_.str().substr(out_.str().size() - 4), "\r\x1b[K");
}

TEST_F(ProgressBarTest, PlainLinesEveryNStepsAndAtEpochEnd) {
  auto o = options(false);
  o.line_every_n_steps = 5;
  view_.state_.num_training_batches = 12;
  ProgressBar bar(o);
  EXPECT_FALSE(bar.is_tty());
  run_epoch(bar);
  const std::string text = out_.str();
  EXPECT_FALSE(contains(text, "\r"));
  EXPECT_FALSE(contains(text, "\x1b"));
  const auto lines = split(text, '\n');
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_EQ(lines[0].rfind("epoch 2/9 step 5/12 ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("epoch 2/9 step 10/12 ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("epoch 2/9 step 12/12 ", 0), 0u) << lines[2];
  for (const auto& line : lines) {
    EXPECT_TRUE(contains(line, " it/s loss=0.412 val_acc=0.871")) << line;
  }
}

TEST_F(ProgressBarTest, PlainLastBatchOnTheCadenceIsPrintedOnce) {
  auto o = options(false);
  o.line_every_n_steps = 5;
  view_.state_.num_training_batches = 10;
  ProgressBar bar(o);
  run_epoch(bar);
  const auto lines = split(out_.str(), '\n');
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_EQ(lines[1].rfind("epoch 2/9 step 10/10 ", 0), 0u);
}

TEST_F(ProgressBarTest, PlainOneLinePerValidationRunAndNoneForSanityCheck) {
  ProgressBar bar(options(false));
  view_.state_.sanity_checking = true;
  run_validation(bar, 2);
  EXPECT_EQ(out_.str(), "");
  view_.state_.sanity_checking = false;
  run_validation(bar, 4);
  const auto lines = split(out_.str(), '\n');
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  EXPECT_EQ(lines[0].rfind("validation epoch 2 batch 4/4 ", 0), 0u) << lines[0];
  EXPECT_TRUE(contains(lines[0], " it/s loss=0.412 val_acc=0.871")) << lines[0];
}

TEST_F(ProgressBarTest, PlainTestAndPredictRunsPrintOneLineEach) {
  view_.state_.fn = volt::TrainerFn::kTesting;
  view_.state_.num_eval_batches = 3;
  ProgressBar bar(options(false));
  bar.on_test_start(view_);
  for (int i = 0; i < 3; ++i) bar.on_test_batch_end(view_, {}, i);
  bar.on_test_end(view_);
  bar.on_predict_start(view_);
  for (int i = 0; i < 3; ++i) bar.on_predict_batch_end(view_, {}, i);
  bar.on_predict_end(view_);
  const auto lines = split(out_.str(), '\n');
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  EXPECT_EQ(lines[0].rfind("test batch 3/3 ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("predict batch 3/3 ", 0), 0u) << lines[1];
}

TEST_F(ProgressBarTest, DrawsNothingOffRankZero) {
  view_.state_.is_global_zero = false;
  ProgressBar tty(options(true));
  ProgressBar plain(options(false));
  run_epoch(tty);
  run_epoch(plain);
  run_validation(tty, 2);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(ProgressBarTest, RefreshRateZeroDisablesTheBar) {
  auto o = options(true);
  o.refresh_rate = 0;
  ProgressBar bar(o);
  EXPECT_FALSE(bar.is_enabled());
  run_epoch(bar);
  run_validation(bar, 2);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(ProgressBarTest, ExceptionEndsAnOpenTerminalLine) {
  ProgressBar bar(options(true));
  bar.on_train_epoch_start(view_);
  run_batches(bar, 0, 3);
  bar.on_exception(view_, std::runtime_error("boom"));
  EXPECT_EQ(out_.str().back(), '\n');
  bar.on_train_end(view_);
  EXPECT_EQ(count(out_.str(), "\n"), 1u);
}

TEST_F(ProgressBarTest, NonStandardStreamIsNotATerminalByDefault) {
  ProgressBarOptions o;
  o.out = &out_;
  EXPECT_FALSE(ProgressBar(o).is_tty());
  EXPECT_EQ(ProgressBar(o).state_key(), "ProgressBar");
}

TEST_F(ProgressBarTest, RejectsInvalidOptions) {
  auto o = options(false);
  o.refresh_rate = -1;
  EXPECT_THROW(ProgressBar{o}, volt::ConfigError);
  o = options(false);
  o.line_every_n_steps = 0;
  EXPECT_THROW(ProgressBar{o}, volt::ConfigError);
  o = options(false);
  o.out = nullptr;
  EXPECT_THROW(ProgressBar{o}, volt::ConfigError);
}

}  // namespace
