#include "volt/data/iterable_dataset.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/stack.h>

#include <utility>

#include "volt/core/error.h"

namespace volt::data {
namespace {

class ShardIterator : public ExampleIterator {
 public:
  ShardIterator(std::shared_ptr<const Dataset> base, WorkerInfo info)
      : base_(std::move(base)), size_(base_->size()), next_(info.shard()), step_(info.num_shards()) {}

  std::optional<Batch> next() override {
    if (next_ >= size_) return std::nullopt;
    Batch example = base_->get(next_);
    next_ += step_;
    return example;
  }

  int64_t skip(int64_t n) override {
    if (n <= 0 || next_ >= size_) return 0;
    const int64_t left = (size_ - next_ + step_ - 1) / step_;
    const int64_t skipped = std::min(n, left);
    next_ += skipped * step_;
    return skipped;
  }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t size_;
  int64_t next_;
  int64_t step_;
};

}  // namespace

std::string WorkerInfo::to_string() const {
  return "worker " + std::to_string(worker_id) + " of " + std::to_string(num_workers) + ", rank " +
         std::to_string(rank) + " of " + std::to_string(world_size) + ", epoch " + std::to_string(epoch);
}

int64_t ExampleIterator::skip(int64_t n) {
  int64_t skipped = 0;
  while (skipped < n && next()) ++skipped;
  return skipped;
}

std::vector<int64_t> shard_indices(int64_t n, const WorkerInfo& info) {
  if (info.num_workers < 1 || info.world_size < 1 || info.worker_id < 0 || info.worker_id >= info.num_workers ||
      info.rank < 0 || info.rank >= info.world_size) {
    throw ConfigError("shard_indices: " + info.to_string() +
                      " is not a reader of the loader; worker_id must be in 0..num_workers-1 and rank in "
                      "0..world_size-1, with num_workers and world_size at least 1.");
  }
  std::vector<int64_t> out;
  if (n <= 0) return out;
  const int64_t step = info.num_shards();
  out.reserve(static_cast<size_t>(n / step + 1));
  for (int64_t i = info.shard(); i < n; i += step) out.push_back(i);
  return out;
}

ShardedDataset::ShardedDataset(std::shared_ptr<const Dataset> base) : base_(std::move(base)) {
  if (!base_) {
    throw ConfigError("ShardedDataset needs a data set, got nullptr. Pass a map-style Dataset such as a TensorDataset.");
  }
}

std::unique_ptr<ExampleIterator> ShardedDataset::open(const WorkerInfo& info) const {
  (void)shard_indices(0, info);  // validates info
  // Every reader of a pass sets the same epoch; a data set whose examples depend on it
  // (ImageFolder's augmentations) then draws this epoch's.
  base_->set_epoch(info.epoch);
  return std::make_unique<ShardIterator>(base_, info);
}

Batch stack_examples(const std::vector<Batch>& examples, const std::string& where) {
  Batch batch;
  if (examples.empty()) return batch;
  const size_t positions = examples.front().size();
  std::vector<at::Tensor> column(examples.size());
  for (size_t p = 0; p < positions; ++p) {
    for (size_t e = 0; e < examples.size(); ++e) {
      if (examples[e].size() != positions) {
        throw DataError(where + ": example " + std::to_string(e) + " of the batch has " +
                        std::to_string(examples[e].size()) + " tensors but example 0 has " +
                        std::to_string(positions) +
                        ". Every example of a stream must hold the same number of tensors; pass a collate "
                        "function (DataLoaderOptions::collate) for ragged data.");
      }
      column[e] = examples[e][p];
    }
    try {
      batch.push_back(at::stack(column, 0));
    } catch (const c10::Error& e) {
      throw DataError(where + ": tensor " + std::to_string(p) +
                      " of the examples cannot be stacked (shapes or types differ): " + e.what_without_backtrace() +
                      ". Make the examples' shapes equal or pass a collate function.");
    }
  }
  return batch;
}

}  // namespace volt::data
