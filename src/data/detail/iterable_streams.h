#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "data/detail/worker_pool.h"
#include "volt/data/dataloader.h"
#include "volt/data/iterable_dataset.h"

namespace volt::data::detail {

/// What a pass over a stream needs, copied out of the DataLoader.
struct StreamPass {
  std::shared_ptr<const IterableDataset> dataset;
  std::function<Batch(std::vector<Batch>)> collate;
  int64_t batch_size = 1;
  bool drop_last = false;
  bool pin = false;
  /// epoch, rank, world_size and num_workers of the pass (worker_id is set per reader).
  WorkerInfo info;
  /// Where the pass starts: examples each reader skips, whose batch comes first.
  StreamPosition from;
};

/// A pass over a stream: on the caller's thread when `num_workers` is 0, else on that many
/// workers (fresh threads, or `pool`'s with persistent_workers), round robin.
std::unique_ptr<BatchStream> make_iterable_stream(StreamPass pass, int64_t num_workers, int64_t prefetch_factor,
                                                  std::shared_ptr<WorkerPool> pool);

}  // namespace volt::data::detail
