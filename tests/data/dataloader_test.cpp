#include "volt/data/dataloader.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Config.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/stack.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "volt/core/error.h"
#include "volt/data/sampler.h"

namespace volt::data {
namespace {

using Indices = std::vector<int64_t>;

// Example i is {[i, i, i] as float, i as int64}: a batch's second tensor names its examples.
std::shared_ptr<TensorDataset> make_rows(int64_t n) {
  at::Tensor targets = at::arange(n, at::kLong);
  at::Tensor inputs = targets.to(at::kFloat).unsqueeze(1).repeat({1, 3});
  return std::make_shared<TensorDataset>(std::vector<at::Tensor>{inputs, targets});
}

Indices to_indices(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return Indices(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::vector<Indices> drain(BatchStream& stream) {
  std::vector<Indices> batches;
  while (auto batch = stream.next()) batches.push_back(to_indices((*batch)[1]));
  return batches;
}

std::vector<Indices> drain(const DataLoader& loader, int64_t skip = 0) {
  return drain(*loader.stream(skip));
}

DataLoaderOptions options(int64_t batch_size, int64_t num_workers = 0) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = num_workers;
  return o;
}

template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

// Wraps a TensorDataset and records how it is used; can be slowed down or made to fail.
class ProbeDataset : public Dataset {
 public:
  explicit ProbeDataset(int64_t n) : rows_(make_rows(n)) {}
  int64_t size() const override { return rows_->size(); }
  Batch get(int64_t index) const override { return rows_->get(index); }
  Batch get_batch(const Indices& indices) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(indices);
      threads_.push_back(std::this_thread::get_id());
      intra_op_threads_.push_back(at::get_num_threads());
    }
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (std::find(indices.begin(), indices.end(), fail_on_) != indices.end()) {
      throw std::runtime_error("cannot decode example " + std::to_string(fail_on_));
    }
    return rows_->get_batch(indices);
  }

  std::vector<Indices> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_;
  }
  std::vector<int> intra_op_threads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return intra_op_threads_;
  }

  int64_t fail_on_ = -1;
  std::chrono::milliseconds delay_{0};

 private:
  std::shared_ptr<TensorDataset> rows_;
  mutable std::mutex mutex_;
  mutable std::vector<Indices> calls_;
  mutable std::vector<std::thread::id> threads_;
  mutable std::vector<int> intra_op_threads_;
};

// ---------------------------------------------------------------------------------------
// Samplers

TEST(SequentialSampler, YieldsZeroToNMinusOneEveryEpoch) {
  SequentialSampler sampler(5);
  EXPECT_EQ(sampler.size(), 5);
  EXPECT_EQ(sampler.indices(0), (Indices{0, 1, 2, 3, 4}));
  EXPECT_EQ(sampler.indices(7), (Indices{0, 1, 2, 3, 4}));
  EXPECT_TRUE(SequentialSampler(0).indices(0).empty());
}

TEST(RandomSampler, YieldsAPermutation) {
  RandomSampler sampler(50, 123);
  Indices order = sampler.indices(0);
  EXPECT_EQ(sampler.size(), 50);
  std::sort(order.begin(), order.end());
  Indices expected(50);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(order, expected);
}

TEST(RandomSampler, DiffersAcrossEpochs) {
  RandomSampler sampler(50, 123);
  EXPECT_NE(sampler.indices(0), sampler.indices(1));
  EXPECT_NE(sampler.indices(1), sampler.indices(2));
}

TEST(RandomSampler, SameSeedAndEpochGiveTheSameOrder) {
  EXPECT_EQ(RandomSampler(50, 9).indices(3), RandomSampler(50, 9).indices(3));
  EXPECT_NE(RandomSampler(50, 9).indices(3), RandomSampler(50, 10).indices(3));
}

TEST(RandomSampler, EqualsRandpermFromAGeneratorSeededWithSeedPlusEpoch) {
  // The documented recipe, recomputed by hand (resume and benchmarks rely on it).
  for (int64_t epoch : {0, 1, 5}) {
    at::Tensor expected = at::randperm(1000, at::detail::createCPUGenerator(42 + epoch));
    EXPECT_EQ(RandomSampler(1000, 42).indices(epoch), to_indices(expected)) << "epoch " << epoch;
  }
}

TEST(RandomSampler, LeavesTheGlobalGeneratorAlone) {
  auto generator = at::detail::getDefaultCPUGenerator();
  const uint64_t saved = generator.current_seed();
  auto reseed = [&](uint64_t seed) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(seed);
  };
  reseed(5);
  at::Tensor expected = at::randperm(20);
  reseed(5);
  RandomSampler(100, 1).indices(0);
  at::Tensor after_sampler = at::randperm(20);
  reseed(saved);
  EXPECT_TRUE(after_sampler.equal(expected));
}

// ---------------------------------------------------------------------------------------
// Batching

TEST(DataLoader, NumBatchesRoundsUpWithoutDropLast) {
  DataLoader loader(make_rows(10), options(3));
  EXPECT_EQ(loader.num_batches(), 4);
  EXPECT_EQ(loader.num_examples(), 10);
  EXPECT_EQ(DataLoader(make_rows(9), options(3)).num_batches(), 3);
  EXPECT_EQ(DataLoader(make_rows(0), options(3)).num_batches(), 0);
}

TEST(DataLoader, NumBatchesRoundsDownWithDropLast) {
  auto o = options(3);
  o.drop_last = true;
  EXPECT_EQ(DataLoader(make_rows(10), o).num_batches(), 3);
  EXPECT_EQ(DataLoader(make_rows(9), o).num_batches(), 3);
  EXPECT_EQ(DataLoader(make_rows(2), o).num_batches(), 0);
}

TEST(DataLoader, LastBatchHoldsTheRemainder) {
  const auto batches = drain(DataLoader(make_rows(10), options(3)));
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[3], (Indices{9}));
}

TEST(DataLoader, DropLastOmitsThePartialBatch) {
  auto o = options(3);
  o.drop_last = true;
  const auto batches = drain(DataLoader(make_rows(10), o));
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches.back(), (Indices{6, 7, 8}));
}

TEST(DataLoader, WithoutShuffleYieldsExamplesInOrder) {
  DataLoader loader(make_rows(7), options(2));
  auto stream = loader.stream();
  auto first = stream->next();
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ(first->at(0).sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(to_indices(first->at(1)), (Indices{0, 1}));
  EXPECT_EQ(drain(*stream), (std::vector<Indices>{{2, 3}, {4, 5}, {6}}));
  EXPECT_FALSE(stream->next().has_value());
}

// ---------------------------------------------------------------------------------------
// Shuffling

Indices flatten(const std::vector<Indices>& batches) {
  Indices all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

DataLoaderOptions shuffled(int64_t batch_size, uint64_t seed, int64_t num_workers = 0) {
  auto o = options(batch_size, num_workers);
  o.shuffle = true;
  o.seed = seed;
  return o;
}

TEST(DataLoader, ShuffleFollowsTheRandomSamplerOfSeedAndEpoch) {
  DataLoader loader(make_rows(37), shuffled(5, 11));
  loader.set_epoch(2);
  EXPECT_EQ(flatten(drain(loader)), RandomSampler(37, 11).indices(2));
}

TEST(DataLoader, ShuffleIsReproducibleForASeedAndEpoch) {
  DataLoader a(make_rows(40), shuffled(6, 5));
  DataLoader b(make_rows(40), shuffled(6, 5));
  a.set_epoch(3);
  b.set_epoch(3);
  EXPECT_EQ(drain(a), drain(b));
  EXPECT_EQ(drain(a), drain(a));
}

TEST(DataLoader, ShuffleChangesTheOrderEachEpoch) {
  DataLoader loader(make_rows(40), shuffled(6, 5));
  const auto epoch0 = drain(loader);
  loader.set_epoch(1);
  EXPECT_EQ(loader.epoch(), 1);
  const auto epoch1 = drain(loader);
  EXPECT_NE(epoch0, epoch1);
  Indices sorted = flatten(epoch1);
  std::sort(sorted.begin(), sorted.end());
  Indices expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
}

TEST(DataLoader, ShuffleWithoutSeedUsesTheDefaultGeneratorSeed) {
  auto generator = at::detail::getDefaultCPUGenerator();
  const uint64_t saved = generator.current_seed();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(777);
  }
  auto o = options(4);
  o.shuffle = true;
  DataLoader loader(make_rows(30), o);
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(saved);
  }
  const auto* sampler = dynamic_cast<const RandomSampler*>(&loader.sampler());
  ASSERT_NE(sampler, nullptr);
  EXPECT_EQ(sampler->seed(), 777u);
  EXPECT_EQ(flatten(drain(loader)), RandomSampler(30, 777).indices(0));
}

// ---------------------------------------------------------------------------------------
// Resuming mid-epoch

TEST(DataLoader, SkipBatchesYieldsTheTailOfAFullPass) {
  for (int64_t workers : {0, 1, 2, 3}) {
    DataLoader loader(make_rows(23), shuffled(4, 3, workers));
    loader.set_epoch(1);
    const auto full = drain(loader);
    ASSERT_EQ(full.size(), 6u);
    for (int64_t skip : {0, 1, 2, 5, 6}) {
      const std::vector<Indices> tail(full.begin() + skip, full.end());
      EXPECT_EQ(drain(loader, skip), tail) << "workers " << workers << ", skip " << skip;
    }
  }
}

TEST(DataLoader, SkipBatchesDoesNotLoadTheSkippedBatches) {
  for (int64_t workers : {0, 2}) {
    auto data = std::make_shared<ProbeDataset>(20);
    DataLoader loader(data, options(4, workers));
    EXPECT_EQ(drain(loader, 3), (std::vector<Indices>{{12, 13, 14, 15}, {16, 17, 18, 19}}));
    EXPECT_EQ(data->calls().size(), 2u) << "workers " << workers;
  }
}

TEST(DataLoader, SkippingPastTheEndYieldsNothing) {
  DataLoader loader(make_rows(10), options(3, 2));
  EXPECT_TRUE(drain(loader, 4).empty());
  EXPECT_TRUE(drain(loader, 100).empty());
}

TEST(DataLoader, RejectsNegativeSkipBatches) {
  DataLoader loader(make_rows(10), options(3));
  EXPECT_THROW(loader.stream(-1), ConfigError);
}

// ---------------------------------------------------------------------------------------
// Workers

TEST(DataLoader, WorkersYieldBatchesInSamplerOrder) {
  for (bool drop_last : {false, true}) {
    auto reference_options = shuffled(4, 17);
    reference_options.drop_last = drop_last;
    DataLoader reference(make_rows(103), reference_options);
    const auto expected = drain(reference);
    for (int64_t workers : {1, 2, 3}) {
      for (int64_t prefetch : {1, 2, 3}) {
        auto o = shuffled(4, 17, workers);
        o.drop_last = drop_last;
        o.prefetch_factor = prefetch;
        DataLoader loader(make_rows(103), o);
        EXPECT_EQ(drain(loader), expected)
            << "workers " << workers << ", prefetch " << prefetch << ", drop_last " << drop_last;
      }
    }
  }
}

TEST(DataLoader, WorkersYieldTheSameTensorsAsTheCallingThread) {
  auto data = make_rows(50);
  DataLoader inline_loader(data, options(8));
  DataLoader worker_loader(data, options(8, 3));
  auto a = inline_loader.stream();
  auto b = worker_loader.stream();
  while (auto x = a->next()) {
    auto y = b->next();
    ASSERT_TRUE(y.has_value());
    ASSERT_EQ(x->size(), y->size());
    for (size_t i = 0; i < x->size(); ++i) EXPECT_TRUE((*x)[i].equal((*y)[i]));
  }
  EXPECT_FALSE(b->next().has_value());
}

TEST(DataLoader, WithoutWorkersLoadsOnTheCallingThread) {
  auto data = std::make_shared<ProbeDataset>(10);
  drain(DataLoader(data, options(3)));
  for (auto id : data->threads()) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(DataLoader, WorkersLoadOffTheCallingThread) {
  auto data = std::make_shared<ProbeDataset>(12);
  drain(DataLoader(data, options(3, 2)));
  const auto calls = data->calls();
  const auto threads = data->threads();
  ASSERT_EQ(threads.size(), 4u);
  std::vector<std::thread::id> by_batch(4);
  for (size_t i = 0; i < calls.size(); ++i) by_batch[calls[i][0] / 3] = threads[i];
  for (auto id : by_batch) EXPECT_NE(id, std::this_thread::get_id());
  EXPECT_EQ(by_batch[0], by_batch[2]);  // batches 0 and 2 belong to worker 0
  EXPECT_EQ(by_batch[1], by_batch[3]);
  EXPECT_NE(by_batch[0], by_batch[1]);
}

TEST(DataLoader, WorkersGatherWithOneIntraOpThreadAndLeaveTheCallerAlone) {
#if !AT_PARALLEL_OPENMP
  GTEST_SKIP() << "only OpenMP builds give each calling thread its own thread count";
#else
  const int saved = at::get_num_threads();
  at::set_num_threads(2);
  auto data = std::make_shared<ProbeDataset>(12);
  drain(DataLoader(data, options(3, 2)));
  EXPECT_EQ(at::get_num_threads(), 2);
  at::set_num_threads(saved);
  for (int n : data->intra_op_threads()) EXPECT_EQ(n, 1);
#endif
}

TEST(DataLoader, BreakingOutEarlyStopsTheWorkers) {
  auto data = std::make_shared<ProbeDataset>(400);
  data->delay_ = std::chrono::milliseconds(2);
  DataLoader loader(data, options(2, 3));
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto stream = loader.stream();
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(stream->next().has_value());
    // Leaving the scope destroys the stream with workers busy or waiting on full queues.
  }
  { auto unused = loader.stream(); }  // destroyed before the first next()
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  // Each worker stops within prefetch_factor + 1 batches of the consumer.
  EXPECT_LT(data->calls().size(), 6u * 3u * 4u);
}

TEST(DataLoader, WorkerExceptionIsRethrownOnTheCallingThreadInOrder) {
  for (int64_t workers : {0, 1, 3}) {
    auto data = std::make_shared<ProbeDataset>(20);
    data->fail_on_ = 9;  // in batch 2 of size 4
    DataLoader loader(data, options(4, workers));
    auto stream = loader.stream();
    EXPECT_EQ(to_indices((*stream->next())[1]), (Indices{0, 1, 2, 3}));
    EXPECT_EQ(to_indices((*stream->next())[1]), (Indices{4, 5, 6, 7}));
    try {
      stream->next();
      ADD_FAILURE() << "no exception with " << workers << " workers";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "cannot decode example 9");
    }
  }
}

TEST(DataLoader, StreamKeepsFailingAfterAWorkerException) {
  auto data = std::make_shared<ProbeDataset>(20);
  data->fail_on_ = 0;
  DataLoader loader(data, options(4, 2));
  auto stream = loader.stream();
  EXPECT_THROW(stream->next(), std::runtime_error);
  EXPECT_THROW(stream->next(), std::runtime_error);
}

// ---------------------------------------------------------------------------------------
// Collation, samplers, options

TEST(DataLoader, CustomCollateReceivesTheExamplesInOrder) {
  for (int64_t workers : {0, 2}) {
    auto o = options(3, workers);
    std::atomic<int> calls{0};
    o.collate = [&calls](std::vector<Batch> examples) {
      ++calls;
      std::vector<at::Tensor> targets;
      for (auto& e : examples) targets.push_back(e[1]);
      // Doubles the targets, to prove this function built the batch.
      return Batch{at::stack(targets).mul(2), at::stack(targets)};
    };
    DataLoader loader(make_rows(7), o);
    auto stream = loader.stream();
    std::vector<Indices> doubled;
    while (auto batch = stream->next()) doubled.push_back(to_indices((*batch)[0]));
    EXPECT_EQ(doubled, (std::vector<Indices>{{0, 2, 4}, {6, 8, 10}, {12}}));
    EXPECT_EQ(calls.load(), 3);
  }
}

class ReverseSampler : public Sampler {
 public:
  explicit ReverseSampler(int64_t n, int64_t yields) : n_(n), yields_(yields) {}
  Indices indices(int64_t) const override {
    Indices order(static_cast<size_t>(yields_));
    for (int64_t i = 0; i < yields_; ++i) order[i] = n_ - 1 - i;
    return order;
  }
  int64_t size() const override { return n_; }

 private:
  int64_t n_, yields_;
};

TEST(DataLoader, SetSamplerReplacesTheOrder) {
  DataLoader loader(make_rows(5), options(2, 1));
  loader.set_sampler(std::make_shared<ReverseSampler>(5, 5));
  EXPECT_EQ(drain(loader), (std::vector<Indices>{{4, 3}, {2, 1}, {0}}));
  EXPECT_THROW(loader.set_sampler(nullptr), ConfigError);
}

TEST(DataLoader, RejectsASamplerThatYieldsOtherThanItsSize) {
  DataLoader loader(make_rows(5), options(2));
  loader.set_sampler(std::make_shared<ReverseSampler>(5, 3));
  EXPECT_THROW(loader.stream(), Error);
}

TEST(DataLoader, RejectsBadOptionsAtConstruction) {
  auto data = make_rows(4);
  auto bad = options(0);
  std::string message = error_message([&] { DataLoader(data, bad); });
  EXPECT_NE(message.find("batch_size"), std::string::npos) << message;
  EXPECT_NE(message.find("got 0"), std::string::npos) << message;
  EXPECT_THROW(DataLoader(data, bad), ConfigError);

  bad = options(2, -1);
  message = error_message([&] { DataLoader(data, bad); });
  EXPECT_NE(message.find("num_workers"), std::string::npos) << message;
  EXPECT_NE(message.find("got -1"), std::string::npos) << message;
  EXPECT_THROW(DataLoader(data, bad), ConfigError);

  bad = options(2, 1);
  bad.prefetch_factor = 0;
  message = error_message([&] { DataLoader(data, bad); });
  EXPECT_NE(message.find("prefetch_factor"), std::string::npos) << message;
  EXPECT_THROW(DataLoader(data, bad), ConfigError);

  EXPECT_THROW(DataLoader(nullptr, options(2)), ConfigError);
}

TEST(DataLoader, PinMemoryIsIgnoredWithoutCuda) {
  auto o = options(4);
  o.pin_memory = true;
  DataLoader loader(make_rows(8), o);
  auto batch = loader.stream()->next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(to_indices((*batch)[1]), (Indices{0, 1, 2, 3}));
  if (at::hasCUDA()) {
    EXPECT_TRUE((*batch)[0].is_pinned());
  } else {
    EXPECT_FALSE((*batch)[0].is_pinned());
  }
}

TEST(DataLoader, StreamOutlivesItsLoader) {
  std::unique_ptr<BatchStream> stream;
  {
    DataLoader loader(make_rows(6), options(4, 2));
    stream = loader.stream();
  }
  EXPECT_EQ(drain(*stream), (std::vector<Indices>{{0, 1, 2, 3}, {4, 5}}));
}

}  // namespace
}  // namespace volt::data

TEST(DistributedSampler, SplitsPadsAndCoversEveryIndex) {
  auto base = std::make_shared<volt::data::SequentialSampler>(10);
  volt::data::DistributedSampler r0(base, 4, 0), r3(base, 4, 3);
  // 10 indices over 4 ranks: padded to 12 by repeating the start, 3 each, strided.
  EXPECT_EQ(r0.size(), 3);
  EXPECT_EQ(r0.indices(0), (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(r3.indices(0), (std::vector<int64_t>{3, 7, 1}));
  std::vector<int> seen(10, 0);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t i : volt::data::DistributedSampler(base, 4, r).indices(0)) ++seen[static_cast<size_t>(i)];
  }
  for (int count : seen) EXPECT_GE(count, 1);
}

TEST(DistributedSampler, DropLastCutsToEqualShares) {
  auto base = std::make_shared<volt::data::SequentialSampler>(10);
  volt::data::DistributedSampler r1(base, 4, 1, /*drop_last=*/true);
  EXPECT_EQ(r1.size(), 2);
  EXPECT_EQ(r1.indices(0), (std::vector<int64_t>{1, 5}));
}

TEST(DistributedSampler, ReshufflesEachEpochIdenticallyOnEveryRank) {
  auto base = std::make_shared<volt::data::RandomSampler>(100, 42);
  volt::data::DistributedSampler a(base, 2, 0), b(base, 2, 1);
  EXPECT_NE(a.indices(0), a.indices(1));  // per-epoch reseed
  std::vector<int64_t> both = a.indices(3);
  const auto other = b.indices(3);
  both.insert(both.end(), other.begin(), other.end());
  std::sort(both.begin(), both.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(both[static_cast<size_t>(i)], i);  // disjoint, complete
}

TEST(DistributedSampler, RejectsABadLayout) {
  auto base = std::make_shared<volt::data::SequentialSampler>(10);
  EXPECT_THROW(volt::data::DistributedSampler(base, 2, 2), volt::ConfigError);
  EXPECT_THROW(volt::data::DistributedSampler(nullptr, 2, 0), volt::ConfigError);
}
