// A loader without a length (an IterableDataset) in fit, validate, test and predict: epochs end
// when the stream ends, limit_*_batches as a count caps it, a share of an unknown length is
// refused before any step, the progress bar shows no total, and a resume mid-epoch continues at
// the next sample (the stream position is in the checkpoint).
#include <ATen/ops/arange.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "support/expect.h"
#include "volt/callbacks/progress_bar.h"
#include "volt/core/error.h"
#include "volt/core/seed.h"
#include "volt/data/iterable_dataset.h"
#include "volt/trainer/trainer.h"

namespace {

namespace fs = std::filesystem;
using volt::BatchLimit;
using volt::Trainer;
using volt::testing::BoringModule;
using volt::testing::ScratchDir;
using volt::testing::quiet_options;
using Ids = std::vector<int64_t>;

/// Sample i is {random input, target in {0, 1}, i}.
std::shared_ptr<volt::data::ShardedDataset> id_stream(int64_t n) {
  auto rows = volt::testing::random_dataset(n, 5);
  auto tensors = rows->tensors();
  tensors.push_back(at::arange(n, at::kLong));
  return std::make_shared<volt::data::ShardedDataset>(std::make_shared<volt::data::TensorDataset>(tensors));
}

std::shared_ptr<volt::data::DataLoader> stream_loader(int64_t n, int64_t batch, int64_t workers) {
  volt::data::DataLoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  return std::make_shared<volt::data::DataLoader>(id_stream(n), o);
}

/// Records the sample ids of every training batch; raises SIGTERM in the training step of
/// global step `interrupt_at` (the Trainer then checkpoints after that step and stops).
class IdModule : public BoringModule {
 public:
  explicit IdModule(int64_t interrupt_at = -1) : interrupt_at_(interrupt_at) {}
  Ids trained;
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    at::Tensor ids = batch.at(2).contiguous();
    trained.insert(trained.end(), ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    if (ctx.global_step() == interrupt_at_) std::raise(SIGTERM);
    return BoringModule::training_step(batch, ctx);
  }

 private:
  int64_t interrupt_at_;
};

Ids sorted(Ids ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

Ids iota(int64_t n) {
  Ids out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
  return out;
}

TEST(IterableFit, EachEpochEndsWhenTheStreamEnds) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  Trainer trainer(o);
  IdModule m;
  // 22 samples over 2 workers: 11 each, batches of 4, 4 and 3 per worker.
  trainer.fit(m, stream_loader(22, 4, 2), stream_loader(10, 4, 0));
  EXPECT_EQ(m.train_steps, 12);
  EXPECT_EQ(trainer.global_step(), 12);
  ASSERT_EQ(m.trained.size(), 44u);
  EXPECT_EQ(sorted(Ids(m.trained.begin(), m.trained.begin() + 22)), iota(22));
  EXPECT_EQ(sorted(Ids(m.trained.begin() + 22, m.trained.end())), iota(22));
  // val_check_interval=1.0: a validation when each training stream ends, over the whole val stream.
  EXPECT_EQ(m.val_steps, 2 * 3);
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "on_train_epoch_end"), 2);
}

TEST(IterableFit, LimitTrainBatchesAsACountCapsTheStream) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  o.limit_train_batches = BatchLimit::count(3);
  o.limit_val_batches = BatchLimit::count(1);
  Trainer trainer(o);
  IdModule m;
  trainer.fit(m, stream_loader(22, 4, 2), stream_loader(10, 4, 0));
  EXPECT_EQ(m.train_steps, 6);
  EXPECT_EQ(m.val_steps, 2);
}

TEST(IterableFit, AShareOfAStreamIsRefusedBeforeAnyStep) {
  const auto refused = [](volt::TrainerOptions o, const std::string& flag) {
    Trainer trainer(o);
    IdModule m;
    try {
      trainer.fit(m, stream_loader(22, 4, 0), stream_loader(10, 4, 0));
      ADD_FAILURE() << flag << " was accepted";
    } catch (const volt::ConfigError& e) {
      EXPECT_TRUE(volt::testing::contains(e.what(), flag)) << e.what();
      EXPECT_TRUE(volt::testing::contains(e.what(), "IterableDataset")) << e.what();
    }
    EXPECT_EQ(m.train_steps, 0) << flag;
    EXPECT_EQ(m.val_steps, 0) << flag;
  };
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.limit_train_batches = BatchLimit::fraction(0.5);
  refused(o, "limit_train_batches=0.5");
  o = quiet_options(dir.path());
  o.limit_val_batches = BatchLimit::fraction(0.25);
  refused(o, "limit_val_batches=0.25");
  o = quiet_options(dir.path());
  o.val_check_interval = BatchLimit::fraction(0.5);
  refused(o, "val_check_interval=0.5");
}

TEST(IterableFit, ValidateTestAndPredictRunTheWholeStream) {
  ScratchDir dir;
  Trainer trainer(quiet_options(dir.path()));
  IdModule m;
  trainer.validate(m, stream_loader(22, 4, 2));
  EXPECT_EQ(m.val_steps, 6);
  trainer.test(m, stream_loader(22, 4, 3));
  EXPECT_EQ(m.test_steps, 6);  // shards of 8, 7 and 7 samples: two batches each
  const auto predictions = trainer.predict(m, stream_loader(22, 5, 0));
  ASSERT_EQ(predictions.size(), 5u);
  int64_t rows = 0;
  for (const auto& p : predictions) rows += p.size(0);
  EXPECT_EQ(rows, 22);
}

TEST(IterableFit, ProgressBarShowsNoTotalForAStream) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_progress_bar = true;
  std::ostringstream out;
  volt::callbacks::ProgressBarOptions bar;
  bar.out = &out;
  bar.force_tty = false;
  bar.line_every_n_steps = 1;
  Trainer trainer(o, {std::make_shared<volt::callbacks::ProgressBar>(bar)});
  IdModule m;
  trainer.fit(m, stream_loader(12, 4, 0));
  const std::string text = out.str();
  EXPECT_TRUE(volt::testing::contains(text, "step 1 ")) << text;
  EXPECT_FALSE(volt::testing::contains(text, "1/")) << text;
  EXPECT_FALSE(volt::testing::contains(text, "9223372036854775807")) << text;
}

// The uninterrupted run, then the same run interrupted after global step k and resumed from the
// interrupt checkpoint: the resumed fit trains on exactly the samples the first one had not.
void expect_resume_continues_at_the_next_sample(int64_t workers, int64_t k) {
  const int64_t n = 29;
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.max_epochs = 2;
  volt::seed_everything(11);
  IdModule whole;
  {
    Trainer trainer(o);
    trainer.fit(whole, stream_loader(n, 3, workers));
  }
  volt::seed_everything(11);
  IdModule first(k);
  std::string ckpt;
  {
    Trainer trainer(o);
    trainer.fit(first, stream_loader(n, 3, workers));
    ckpt = trainer.state().interrupt_checkpoint;
  }
  ASSERT_FALSE(ckpt.empty()) << "no interrupt at step " << k;
  IdModule second;
  {
    Trainer trainer(o);
    trainer.fit(second, stream_loader(n, 3, workers), nullptr, ckpt);
  }
  Ids joined = first.trained;
  joined.insert(joined.end(), second.trained.begin(), second.trained.end());
  EXPECT_EQ(joined, whole.trained) << workers << " workers, interrupted after step " << k;
  volt::testing::expect_bitwise_equal(volt::testing::weights(second), volt::testing::weights(whole));
}

TEST(IterableResume, ResumedMidEpochContinuesAtTheNextSample) {
  for (int64_t workers : {0, 3}) {
    for (int64_t k : {0, 4, 9, 13}) expect_resume_continues_at_the_next_sample(workers, k);
  }
}

TEST(IterableResume, AnEpochEndCheckpointResumesAtTheNextEpoch) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  o.enable_checkpointing = true;
  o.max_epochs = 1;
  {
    Trainer trainer(o);
    IdModule m;
    trainer.fit(m, stream_loader(22, 4, 2));
  }
  std::string ckpt;
  for (const auto& f : volt::testing::files_under(dir.path())) {
    if (f.size() > 5 && f.substr(f.size() - 5) == ".ckpt") ckpt = dir.path() + "/" + f;
  }
  ASSERT_FALSE(ckpt.empty());
  o.max_epochs = 2;
  Trainer trainer(o);
  IdModule m;
  trainer.fit(m, stream_loader(22, 4, 2), nullptr, ckpt);
  EXPECT_EQ(m.train_steps, 6) << "only epoch 1 runs";
  EXPECT_EQ(std::count(m.calls.begin(), m.calls.end(), "on_train_epoch_end"), 1)
      << "epoch 0's end must not run again";
  EXPECT_EQ(sorted(m.trained), iota(22));
}

TEST(IterableResume, APositionOfAnotherWorkerCountIsRefused) {
  ScratchDir dir;
  auto o = quiet_options(dir.path());
  IdModule first(2);
  std::string ckpt;
  {
    Trainer trainer(o);
    trainer.fit(first, stream_loader(29, 3, 3));
    ckpt = trainer.state().interrupt_checkpoint;
  }
  ASSERT_FALSE(ckpt.empty());
  Trainer trainer(o);
  IdModule second;
  try {
    trainer.fit(second, stream_loader(29, 3, 2), nullptr, ckpt);
    FAIL() << "a 3-worker position resumed on 2 workers";
  } catch (const volt::Error& e) {
    EXPECT_TRUE(volt::testing::contains(e.what(), "num_workers=3")) << e.what();
  }
  EXPECT_EQ(second.train_steps, 0);
}

}  // namespace
