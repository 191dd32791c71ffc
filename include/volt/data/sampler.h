#pragma once
#include <cstdint>
#include <memory>
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

/// Each rank's share of another sampler's order (PyTorch's DistributedSampler): the base
/// order of the epoch (so the shuffle and its per-epoch reseed come from the base, the same
/// on every rank), padded by repeating its start to a multiple of `num_replicas` (or cut
/// to one with drop_last), then every num_replicas-th index from `rank` on. Every rank gets
/// the same number of indices, so no rank waits in a collective for a batch another lacks.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(std::shared_ptr<const Sampler> base, int64_t num_replicas, int64_t rank, bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return per_rank_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  const Sampler& base() const { return *base_; }

 private:
  std::shared_ptr<const Sampler> base_;
  int64_t num_replicas_;
  int64_t rank_;
  bool drop_last_;
  int64_t per_rank_;
};

}  // namespace volt::data
