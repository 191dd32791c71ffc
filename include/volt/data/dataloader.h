#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "volt/core/types.h"
#include "volt/data/dataset.h"
#include "volt/data/iterable_dataset.h"
#include "volt/data/sampler.h"

namespace volt::data {

/// The most background workers a DataLoader accepts: 4 per core of this machine (at least 8).
int64_t max_loader_workers();

struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// Visit examples in a fresh random order every epoch (RandomSampler).
  bool shuffle = false;
  /// Drop the last batch when it is smaller than batch_size.
  bool drop_last = false;
  /// Threads that prepare batches in the background; 0: on the caller's thread. At most
  /// max_loader_workers().
  int64_t num_workers = 0;
  /// Batches each worker prepares ahead: 1 .. 1024.
  int64_t prefetch_factor = 2;
  /// Copy batches into page-locked memory (only when CUDA is available; ignored otherwise).
  bool pin_memory = false;
  /// Keep the worker threads from one pass to the next (PyTorch's persistent_workers); needs
  /// num_workers > 0. One pass of the loader at a time then: a second stream() while the
  /// first is alive is an error.
  bool persistent_workers = false;
  /// Seed of the shuffle; unset: LibTorch's default CPU generator's current seed
  /// (so seed_everything / Trainer seed fixes it).
  std::optional<uint64_t> seed;
  /// Turns examples into a batch; unset: Dataset::get_batch (stack position by position).
  std::function<Batch(std::vector<Batch>)> collate;
};

/// Where a pass stands: what a resumed pass needs to continue at the next batch.
struct StreamPosition {
  /// Batches this pass delivered (counting those skipped when it was resumed).
  int64_t batches = 0;
  /// A loader without a length: examples each worker's iterator delivered, by worker id
  /// (one entry without background workers), and the worker whose batch comes next.
  std::vector<int64_t> examples;
  int64_t next_worker = 0;
};

/// One pass over a DataLoader. Batches come in sampler order whatever the number of
/// workers (for a stream: round robin over the workers, each batching its own examples).
/// Destroying it stops its workers.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  /// The next batch, or nullopt at the end of the pass.
  virtual std::optional<Batch> next() = 0;
  /// Where the pass stands after the batches next() returned so far (not those prefetched).
  virtual StreamPosition position() const = 0;
};

namespace detail {
class WorkerPool;
}

/// Batches from a Dataset (sampler, batching, collation) or from an IterableDataset (a stream
/// without a length, batched per worker), with background prefetch.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  /// A loader over a stream: no length, no sampler (shuffle must be false; shuffle inside the
  /// data set, with WorkerInfo::epoch); each worker batches the examples of its own iterator,
  /// and the last batch of each worker may be smaller (dropped with drop_last).
  DataLoader(std::shared_ptr<const IterableDataset> dataset, DataLoaderOptions options);
  /// No data set: a ConfigError (the overload keeps DataLoader(nullptr, ...) unambiguous).
  DataLoader(std::nullptr_t, DataLoaderOptions options)
      : DataLoader(std::shared_ptr<const Dataset>(), std::move(options)) {}
  ~DataLoader();

  /// False for a loader over an IterableDataset (len() raises in PyTorch): the Trainer then
  /// runs until the stream ends.
  bool has_length() const { return dataset_ != nullptr; }
  /// Batches per epoch (len(dataloader) in PyTorch). Throws for a loader without a length.
  int64_t num_batches() const;
  /// Examples per epoch as the sampler yields them. Throws for a loader without a length.
  int64_t num_examples() const;
  /// Which epoch the next stream() serves (the shuffle order depends on it).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  /// Replaces the sampler (a distributed sampler plugs in here). Not for a stream.
  void set_sampler(std::shared_ptr<const Sampler> sampler);
  /// The sampler; nullptr for a loader without a length.
  const Sampler& sampler() const { return *sampler_; }
  std::shared_ptr<const Sampler> sampler_ptr() const { return sampler_; }
  /// A stream's ddp place, passed to its readers in WorkerInfo (the Trainer sets it under ddp;
  /// a map-style loader takes a DistributedSampler instead).
  void set_distributed(int64_t world_size, int64_t rank);
  int64_t world_size() const { return world_size_; }
  int64_t rank() const { return rank_; }
  const DataLoaderOptions& options() const { return options_; }
  /// The map-style data set (nullptr for a stream) and the stream (nullptr for map-style).
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  const std::shared_ptr<const IterableDataset>& iterable_dataset() const { return iterable_; }
  /// Readers of a pass over a stream: num_workers, or 1 without workers.
  int64_t num_readers() const { return options_.num_workers > 0 ? options_.num_workers : 1; }

  /// Starts a pass over the current epoch, skipping its first `skip_batches` batches
  /// (used to resume mid-epoch) without loading them. Calls Dataset::set_epoch first.
  /// For a stream, skip_batches must be 0 (resume from a StreamPosition).
  std::unique_ptr<BatchStream> stream(int64_t skip_batches = 0) const;
  /// Starts a pass that continues where `from` stands (a position of an earlier pass of the
  /// same epoch, e.g. from a checkpoint): for a stream, each worker's iterator skips the
  /// examples it had delivered and the round robin resumes at from.next_worker; map-style
  /// loaders skip from.batches batches. A stream's position must come from the same
  /// worker count (the sharding depends on it): otherwise a ConfigError.
  std::unique_ptr<BatchStream> stream(const StreamPosition& from) const;

 private:
  void check_options() const;
  std::shared_ptr<detail::WorkerPool> pool() const;

  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const IterableDataset> iterable_;
  DataLoaderOptions options_;
  std::shared_ptr<const Sampler> sampler_;
  int64_t epoch_ = 0;
  int64_t world_size_ = 1;
  int64_t rank_ = 0;
  mutable std::shared_ptr<detail::WorkerPool> pool_;  // persistent_workers: created by the first pass
};

}  // namespace volt::data
