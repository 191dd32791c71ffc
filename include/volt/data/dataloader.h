#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "volt/core/types.h"
#include "volt/data/dataset.h"
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
  /// Seed of the shuffle; unset: LibTorch's default CPU generator's current seed
  /// (so seed_everything / Trainer seed fixes it).
  std::optional<uint64_t> seed;
  /// Turns examples into a batch; unset: Dataset::get_batch (stack position by position).
  std::function<Batch(std::vector<Batch>)> collate;
};

/// One pass over a DataLoader. Batches come in sampler order whatever the number of
/// workers. Destroying it stops and joins its workers.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  /// The next batch, or nullopt at the end of the pass.
  virtual std::optional<Batch> next() = 0;
};

/// Batches from a Dataset: sampler, batching, collation, background prefetch.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);

  /// Batches per epoch (len(dataloader) in PyTorch).
  int64_t num_batches() const;
  /// Examples per epoch as the sampler yields them.
  int64_t num_examples() const;
  /// Which epoch the next stream() serves (the shuffle order depends on it).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  /// Replaces the sampler (a distributed sampler plugs in here).
  void set_sampler(std::shared_ptr<const Sampler> sampler);
  const Sampler& sampler() const { return *sampler_; }
  std::shared_ptr<const Sampler> sampler_ptr() const { return sampler_; }
  const DataLoaderOptions& options() const { return options_; }
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }

  /// Starts a pass over the current epoch, skipping its first `skip_batches` batches
  /// (used to resume mid-epoch) without loading them.
  std::unique_ptr<BatchStream> stream(int64_t skip_batches = 0) const;

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const Sampler> sampler_;
  int64_t epoch_ = 0;
};

}  // namespace volt::data
