#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "volt/core/types.h"
#include "volt/data/dataset.h"

namespace volt::data {

/// Who reads a stream (PyTorch's torch.utils.data.get_worker_info(), plus the ddp rank): the
/// DataLoader passes it to IterableDataset::open for every pass and worker, so a data set can
/// give each (rank, worker) pair its own part of the stream. With num_workers=0 the loader reads
/// on the caller's thread as worker 0 of 1.
struct WorkerInfo {
  /// The epoch of this pass (DataLoader::set_epoch): reseed shuffles and augmentations with it.
  int64_t epoch = 0;
  /// This process's rank and the number of ranks (1 outside ddp).
  int64_t rank = 0;
  int64_t world_size = 1;
  /// This worker and the loader's worker count (0 of 1 without background workers).
  int64_t worker_id = 0;
  int64_t num_workers = 1;

  /// The reader's shard: rank * num_workers + worker_id, in 0 .. num_shards() - 1.
  int64_t shard() const { return rank * num_workers + worker_id; }
  /// Readers over all ranks: world_size * num_workers.
  int64_t num_shards() const { return world_size * num_workers; }
  /// "worker 1 of 3, rank 0 of 2, epoch 4", for messages.
  std::string to_string() const;
};

/// One reader's examples, in order. Called from one thread only (the worker's).
class ExampleIterator {
 public:
  virtual ~ExampleIterator() = default;
  /// The next example, or nullopt at the end of this reader's stream.
  virtual std::optional<Batch> next() = 0;
  /// Passes over the next `n` examples (resuming mid-epoch) and returns how many there were
  /// (fewer than `n` when the stream ends first). The default reads and drops them; override
  /// it when the source can seek.
  virtual int64_t skip(int64_t n);
};

/// A data set without a length, read as a stream (PyTorch's IterableDataset): every pass opens
/// one iterator per reader, and the loader batches each reader's examples on its own (a batch
/// never mixes readers). Implementations must give the readers of one pass disjoint parts of
/// the data, using `info` (shard() of num_shards(), or shard_indices for a source with random
/// access), or every reader yields the whole stream.
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  /// An iterator over the examples of reader `info` in epoch info.epoch. Called by the loader
  /// at the start of each pass, on the reader's thread; must be thread-safe for distinct infos.
  virtual std::unique_ptr<ExampleIterator> open(const WorkerInfo& info) const = 0;
};

/// The indices of 0 .. n-1 that reader `info` owns: shard(), shard() + num_shards(), ... Over
/// all num_shards() readers every index appears exactly once. Uneven tails: when n is not a
/// multiple of num_shards(), the first n % num_shards() readers get one index more (nothing is
/// dropped or repeated; under ddp the Trainer ends the epoch when the first rank's stream ends,
/// docs/data.md "Iterable datasets and the loader").
std::vector<int64_t> shard_indices(int64_t n, const WorkerInfo& info);

/// A map-style Dataset read as a stream: reader `info` yields base->get(i) for
/// i in shard_indices(base->size(), info), in increasing order; skip() seeks.
class ShardedDataset : public IterableDataset {
 public:
  explicit ShardedDataset(std::shared_ptr<const Dataset> base);
  std::unique_ptr<ExampleIterator> open(const WorkerInfo& info) const override;
  const std::shared_ptr<const Dataset>& base() const { return base_; }

 private:
  std::shared_ptr<const Dataset> base_;
};

/// Stacks examples position by position along a new first dimension (the loader's collation of
/// a stream when DataLoaderOptions::collate is unset). `where` names the batch in errors.
Batch stack_examples(const std::vector<Batch>& examples, const std::string& where);

}  // namespace volt::data
