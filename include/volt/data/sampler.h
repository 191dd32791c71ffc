#pragma once
#include <cstdint>
#include <vector>

namespace volt::data {

/// Chooses which examples an epoch visits, in which order. The DataLoader asks it once
/// per epoch; a distributed sampler (a later plug-in) gives each rank its share.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of epoch `epoch`, in order. Must be a pure function of the epoch.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  /// How many indices every epoch yields.
  virtual int64_t size() const = 0;
};

/// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n) : n_(n) {}
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

/// A fresh permutation each epoch: torch::randperm(n) drawn from a CPU generator seeded
/// with seed + epoch, so any epoch's order can be recomputed (resume, benchmarks).
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

}  // namespace volt::data
