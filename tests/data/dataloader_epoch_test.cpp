#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "volt/core/error.h"
#include "volt/data/dataloader.h"

namespace volt::data {
namespace {

// Example i is {epoch it was read in, i}; get() counts the threads it first runs on.
class EpochRows : public Dataset {
 public:
  explicit EpochRows(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Batch get(int64_t index) const override {
    thread_local const EpochRows* counted_for = nullptr;
    if (counted_for != this) {
      counted_for = this;
      ++threads_;
    }
    return {at::scalar_tensor(epoch_.load(), at::kLong), at::scalar_tensor(index, at::kLong)};
  }
  void set_epoch(int64_t epoch) const override {
    epoch_.store(epoch);
    ++calls_;
  }
  int64_t threads() const { return threads_.load(); }
  int64_t calls() const { return calls_.load(); }

 private:
  int64_t n_;
  mutable std::atomic<int64_t> epoch_{-1};
  mutable std::atomic<int64_t> calls_{0};
  mutable std::atomic<int64_t> threads_{0};
};

std::set<int64_t> epochs_read(BatchStream& stream) {
  std::set<int64_t> out;
  while (auto batch = stream.next()) {
    at::Tensor e = batch->at(0).contiguous();
    out.insert(e.data_ptr<int64_t>(), e.data_ptr<int64_t>() + e.numel());
  }
  return out;
}

DataLoaderOptions epoch_options(int64_t workers, bool persistent) {
  DataLoaderOptions o;
  o.batch_size = 2;
  o.num_workers = workers;
  o.persistent_workers = persistent;
  return o;
}

TEST(DataLoaderEpoch, SetsTheDatasetsEpochBeforeEachPass) {
  for (int64_t workers : {0, 2}) {
    auto rows = std::make_shared<EpochRows>(9);
    DataLoader loader(rows, epoch_options(workers, false));
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      loader.set_epoch(epoch);
      auto s = loader.stream();
      EXPECT_EQ(epochs_read(*s), std::set<int64_t>{epoch}) << workers << " workers";
    }
    EXPECT_EQ(rows->calls(), 3);
  }
}

TEST(DataLoaderEpoch, SubsetPassesTheEpochToItsBase) {
  auto rows = std::make_shared<EpochRows>(9);
  auto subset = std::make_shared<Subset>(rows, std::vector<int64_t>{1, 3, 5});
  DataLoader loader(subset, epoch_options(0, false));
  loader.set_epoch(4);
  auto s = loader.stream();
  EXPECT_EQ(epochs_read(*s), std::set<int64_t>{4});
}

TEST(DataLoaderEpoch, ShardedStreamSetsItsBasesEpoch) {
  auto rows = std::make_shared<EpochRows>(9);
  DataLoader loader(std::make_shared<ShardedDataset>(rows), epoch_options(3, false));
  loader.set_epoch(5);
  auto s = loader.stream();
  EXPECT_EQ(epochs_read(*s), std::set<int64_t>{5});
}

TEST(DataLoaderPersistentWorkers, KeepsItsWorkerThreadsAcrossEpochs) {
  auto rows = std::make_shared<EpochRows>(40);
  DataLoader loader(rows, epoch_options(2, true));
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    loader.set_epoch(epoch);
    auto s = loader.stream();
    EXPECT_EQ(epochs_read(*s), std::set<int64_t>{epoch});
  }
  EXPECT_EQ(rows->threads(), 2);

  // Without persistent_workers every pass starts threads of its own.
  auto fresh = std::make_shared<EpochRows>(40);
  DataLoader plain(fresh, epoch_options(2, false));
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    auto s = plain.stream();
    epochs_read(*s);
  }
  EXPECT_EQ(fresh->threads(), 8);
}

TEST(DataLoaderPersistentWorkers, KeepsAStreamsWorkersAcrossEpochs) {
  auto rows = std::make_shared<EpochRows>(30);
  DataLoader loader(std::make_shared<ShardedDataset>(rows), epoch_options(3, true));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    auto s = loader.stream();
    EXPECT_EQ(epochs_read(*s), std::set<int64_t>{epoch});
  }
  EXPECT_EQ(rows->threads(), 3);
}

TEST(DataLoaderPersistentWorkers, RefusesASecondPassWhileOneRuns) {
  auto rows = std::make_shared<EpochRows>(40);
  DataLoader loader(rows, epoch_options(2, true));
  auto first = loader.stream();
  first->next();
  EXPECT_THROW(loader.stream(), Error);
  first.reset();
  auto second = loader.stream();
  EXPECT_TRUE(second->next().has_value());
}

TEST(DataLoaderPersistentWorkers, NeedsWorkers) {
  EXPECT_THROW(DataLoader(std::make_shared<EpochRows>(4), epoch_options(0, true)), ConfigError);
}

TEST(DataLoaderPersistentWorkers, AStreamAbandonedMidPassReleasesTheWorkers) {
  auto rows = std::make_shared<EpochRows>(200);
  DataLoader loader(rows, epoch_options(2, true));
  for (int i = 0; i < 5; ++i) {
    auto s = loader.stream();
    s->next();  // the workers are blocked on a full prefetch queue when the stream goes
  }
  auto s = loader.stream();
  int64_t batches = 0;
  while (s->next()) ++batches;
  EXPECT_EQ(batches, 100);
  EXPECT_EQ(rows->threads(), 2);
}

}  // namespace
}  // namespace volt::data
