#include "volt/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randperm.h>

#include <numeric>

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

}  // namespace volt::data
