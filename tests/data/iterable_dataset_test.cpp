#include "volt/data/iterable_dataset.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/data/dataloader.h"

namespace volt::data {
namespace {

using Indices = std::vector<int64_t>;

// Example i is {[i, i] as float, i as int64}.
std::shared_ptr<TensorDataset> id_rows(int64_t n) {
  at::Tensor targets = at::arange(n, at::kLong);
  at::Tensor inputs = targets.to(at::kFloat).unsqueeze(1).repeat({1, 2});
  return std::make_shared<TensorDataset>(std::vector<at::Tensor>{inputs, targets});
}

Indices ids_of(const Batch& batch) {
  at::Tensor t = batch.at(1).contiguous();
  return Indices(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::vector<Indices> read_all(BatchStream& stream) {
  std::vector<Indices> out;
  while (auto batch = stream.next()) out.push_back(ids_of(*batch));
  return out;
}

DataLoaderOptions stream_options(int64_t batch_size, int64_t workers) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = workers;
  return o;
}

TEST(ShardIndices, CoverEveryIndexExactlyOnceAcrossTwoRanksAndThreeWorkers) {
  for (int64_t n : {0, 1, 5, 6, 7, 12, 13, 100, 101}) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    std::vector<size_t> sizes;
    for (int64_t rank = 0; rank < 2; ++rank) {
      for (int64_t w = 0; w < 3; ++w) {
        WorkerInfo info{0, rank, 2, w, 3};
        const Indices mine = shard_indices(n, info);
        EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
        sizes.push_back(mine.size());
        for (int64_t i : mine) ++seen[static_cast<size_t>(i)];
      }
    }
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], 1) << "n=" << n << " index " << i;
    // The uneven tail: shards differ by at most one index, the first n % 6 get the extra one.
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*hi - *lo, 1u) << "n=" << n;
    for (size_t s = 0; s < sizes.size(); ++s) {
      EXPECT_EQ(sizes[s], static_cast<size_t>(n / 6 + (static_cast<int64_t>(s) < n % 6 ? 1 : 0))) << "n=" << n;
    }
  }
}

TEST(ShardIndices, RefusesAReaderOutsideTheLoader) {
  EXPECT_THROW(shard_indices(10, WorkerInfo{0, 0, 1, 3, 3}), ConfigError);
  EXPECT_THROW(shard_indices(10, WorkerInfo{0, 2, 2, 0, 1}), ConfigError);
  EXPECT_THROW(shard_indices(10, WorkerInfo{0, 0, 0, 0, 1}), ConfigError);
}

TEST(IterableDataLoader, TwoRanksOfThreeWorkersSeeEverySampleExactlyOnce) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(47));
  std::multiset<int64_t> seen;
  for (int64_t rank = 0; rank < 2; ++rank) {
    DataLoader loader(stream, stream_options(4, 3));
    loader.set_distributed(2, rank);
    auto pass = loader.stream();
    for (const auto& ids : read_all(*pass)) seen.insert(ids.begin(), ids.end());
  }
  ASSERT_EQ(seen.size(), 47u);
  for (int64_t i = 0; i < 47; ++i) EXPECT_EQ(seen.count(i), 1u) << "sample " << i;
}

TEST(IterableDataLoader, BatchesEachWorkerOnItsOwnInRoundRobinOrder) {
  // 3 workers over 0..10: worker 0 reads 0,3,6,9; worker 1 1,4,7,10; worker 2 2,5,8.
  auto stream = std::make_shared<ShardedDataset>(id_rows(11));
  DataLoader loader(stream, stream_options(3, 3));
  const std::vector<Indices> expected = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}, {9}, {10}};
  for (int pass = 0; pass < 3; ++pass) {
    auto s = loader.stream();
    EXPECT_EQ(read_all(*s), expected) << "pass " << pass;
  }
  auto o = stream_options(3, 3);
  o.drop_last = true;
  DataLoader dropping(stream, o);
  auto s = dropping.stream();
  EXPECT_EQ(read_all(*s), (std::vector<Indices>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
}

TEST(IterableDataLoader, WithoutWorkersReadsOneShardOnTheCallersThread) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(7));
  DataLoader loader(stream, stream_options(3, 0));
  auto s = loader.stream();
  EXPECT_EQ(read_all(*s), (std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_FALSE(loader.has_length());
  EXPECT_THROW(loader.num_batches(), ConfigError);
  EXPECT_THROW(loader.num_examples(), ConfigError);
}

TEST(IterableDataLoader, CollatesWithTheUsersFunctionOnEachWorkersExamples) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(10));
  auto o = stream_options(3, 2);
  o.collate = [](std::vector<Batch> examples) {
    // Sums the ids of a batch instead of stacking them.
    int64_t sum = 0;
    for (const auto& e : examples) sum += e.at(1).item<int64_t>();
    return Batch{at::scalar_tensor(static_cast<double>(examples.size())), at::scalar_tensor(sum, at::kLong)};
  };
  DataLoader loader(stream, o);
  auto s = loader.stream();
  // Worker 0 reads 0,2,4 then 6,8; worker 1 reads 1,3,5 then 7,9.
  EXPECT_EQ(read_all(*s), (std::vector<Indices>{{6}, {9}, {14}, {16}}));
}

TEST(IterableDataLoader, RefusesShuffleSamplersAndSkipBatches) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(7));
  auto o = stream_options(2, 0);
  o.shuffle = true;
  EXPECT_THROW(DataLoader(stream, o), ConfigError);
  DataLoader loader(stream, stream_options(2, 0));
  EXPECT_THROW(loader.set_sampler(std::make_shared<SequentialSampler>(7)), ConfigError);
  EXPECT_THROW(loader.stream(1), ConfigError);
  EXPECT_THROW(loader.set_distributed(2, 2), ConfigError);
  DataLoader map_style(id_rows(7), stream_options(2, 0));
  EXPECT_THROW(map_style.set_distributed(2, 0), ConfigError);
}

TEST(IterableDataLoader, ResumedPassContinuesAtTheNextSample) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(29));
  for (int64_t workers : {0, 1, 3}) {
    DataLoader loader(stream, stream_options(4, workers));
    loader.set_epoch(2);
    auto whole = loader.stream();
    const auto expected = read_all(*whole);
    for (size_t k = 0; k <= expected.size(); ++k) {
      auto first = loader.stream();
      std::vector<Indices> got;
      for (size_t i = 0; i < k; ++i) got.push_back(ids_of(*first->next()));
      const StreamPosition at = first->position();
      EXPECT_EQ(at.batches, static_cast<int64_t>(k));
      first.reset();
      auto rest = loader.stream(at);
      for (auto& ids : read_all(*rest)) got.push_back(ids);
      EXPECT_EQ(got, expected) << workers << " workers, interrupted after " << k << " batches";
      EXPECT_EQ(rest->position().batches, static_cast<int64_t>(expected.size()));
    }
  }
}

TEST(IterableDataLoader, RefusesAPositionOfAnotherWorkerCount) {
  auto stream = std::make_shared<ShardedDataset>(id_rows(20));
  DataLoader three(stream, stream_options(2, 3));
  auto s = three.stream();
  s->next();
  const StreamPosition at = s->position();
  s.reset();
  DataLoader two(stream, stream_options(2, 2));
  try {
    two.stream(at);
    FAIL() << "a 3-worker position resumed on 2 workers";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_workers=3"), std::string::npos) << e.what();
  }
  // 0 and 1 workers read the same single shard: their positions are interchangeable.
  DataLoader none(stream, stream_options(2, 0));
  auto n = none.stream();
  n->next();
  DataLoader one(stream, stream_options(2, 1));
  auto rest = one.stream(n->position());
  EXPECT_EQ(ids_of(*rest->next()), (Indices{2, 3}));
}

// Worker w's stream is w*100, w*100+1, ...; example `bad` of worker `bad_worker` throws.
class CountingStream : public IterableDataset {
 public:
  CountingStream(int64_t length, int64_t bad_worker, int64_t bad) : length_(length), bad_worker_(bad_worker), bad_(bad) {}
  std::unique_ptr<ExampleIterator> open(const WorkerInfo& info) const override {
    class It : public ExampleIterator {
     public:
      It(const CountingStream& s, WorkerInfo info) : s_(s), info_(info) {}
      std::optional<Batch> next() override {
        if (i_ >= s_.length_) return std::nullopt;
        if (info_.worker_id == s_.bad_worker_ && i_ == s_.bad_) throw std::runtime_error("record is truncated");
        const int64_t id = info_.epoch * 10000 + info_.worker_id * 100 + i_++;
        return Batch{at::scalar_tensor(static_cast<double>(id)), at::scalar_tensor(id, at::kLong)};
      }

     private:
      const CountingStream& s_;
      WorkerInfo info_;
      int64_t i_ = 0;
    };
    return std::make_unique<It>(*this, info);
  }

 private:
  int64_t length_, bad_worker_, bad_;
};

TEST(IterableDataLoader, WorkerErrorNamesTheWorkerAndTheSample) {
  auto stream = std::make_shared<CountingStream>(10, 1, 4);
  DataLoader loader(stream, stream_options(2, 3));
  auto s = loader.stream();
  try {
    while (s->next()) {
    }
    FAIL() << "the bad example did not surface";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker 1 of 3"), std::string::npos) << what;
    EXPECT_NE(what.find("example 4 of its stream"), std::string::npos) << what;
    EXPECT_NE(what.find("record is truncated"), std::string::npos) << what;
  }
}

TEST(IterableDataLoader, PassesTheEpochAndWorkerToEachReader) {
  auto stream = std::make_shared<CountingStream>(2, -1, -1);
  DataLoader loader(stream, stream_options(2, 2));
  loader.set_epoch(3);
  auto s = loader.stream();
  EXPECT_EQ(read_all(*s), (std::vector<Indices>{{30000, 30001}, {30100, 30101}}));
}

}  // namespace
}  // namespace volt::data
