#include "volt/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randperm.h>

#include <numeric>
#include <string>

#include "volt/core/error.h"

namespace volt::data {

std::vector<int64_t> SequentialSampler::indices(int64_t /*epoch*/) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  // A generator of its own, seeded from (seed, epoch) only, so the order neither
  // depends on nor disturbs the global RNG, and is recomputable by hand.
  at::Tensor perm =
      at::randperm(n_, at::detail::createCPUGenerator(seed_ + static_cast<uint64_t>(epoch)));
  const int64_t* data = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n_);
}

DistributedSampler::DistributedSampler(std::shared_ptr<const Sampler> base, int64_t num_replicas, int64_t rank,
                                       bool drop_last)
    : base_(std::move(base)), num_replicas_(num_replicas), rank_(rank), drop_last_(drop_last) {
  if (!base_) throw ConfigError("DistributedSampler needs a base sampler; got nullptr.");
  if (num_replicas_ < 1 || rank_ < 0 || rank_ >= num_replicas_) {
    throw ConfigError("DistributedSampler: rank " + std::to_string(rank_) + " of " + std::to_string(num_replicas_) +
                      " replicas is not a valid layout (need 0 <= rank < num_replicas).");
  }
  const int64_t n = base_->size();
  per_rank_ = drop_last_ ? n / num_replicas_ : (n + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all = base_->indices(epoch);
  const auto total = static_cast<size_t>(per_rank_ * num_replicas_);
  if (all.size() > total) {
    all.resize(total);
  } else if (!all.empty()) {
    // Pad by repeating from the start (more than once when the data set is tiny).
    const size_t n = all.size();
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i % n]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (size_t i = static_cast<size_t>(rank_); i < all.size(); i += static_cast<size_t>(num_replicas_)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace volt::data
