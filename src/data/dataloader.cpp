#include "volt/data/dataloader.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "data/detail/iterable_streams.h"
#include "data/detail/worker_pool.h"
#include "volt/core/error.h"

namespace volt::data {
namespace {

// What a pass needs, copied out of the DataLoader so a stream outlives its loader.
struct Pass {
  std::shared_ptr<const Dataset> dataset;
  std::function<Batch(std::vector<Batch>)> collate;
  std::vector<int64_t> order;
  int64_t batch_size = 1;
  int64_t begin_batch = 0;
  int64_t end_batch = 0;
  bool pin = false;

  // `indices` is the caller's buffer, reused across batches to spare an allocation.
  Batch load(int64_t k, std::vector<int64_t>& indices) const {
    const int64_t first = k * batch_size;
    const int64_t last = std::min(first + batch_size, static_cast<int64_t>(order.size()));
    indices.assign(order.begin() + first, order.begin() + last);
    Batch batch;
    if (collate) {
      std::vector<Batch> examples;
      examples.reserve(indices.size());
      for (int64_t index : indices) examples.push_back(dataset->get(index));
      batch = collate(std::move(examples));
    } else {
      batch = dataset->get_batch(indices);
    }
    if (pin) {
      for (auto& t : batch) {
        if (t.defined()) t = t.pin_memory();
      }
    }
    return batch;
  }
};

class InlineStream : public BatchStream {
 public:
  explicit InlineStream(Pass pass) : pass_(std::move(pass)), next_(pass_.begin_batch) {}

  std::optional<Batch> next() override {
    if (next_ >= pass_.end_batch) return std::nullopt;
    return pass_.load(next_++, indices_);
  }

  StreamPosition position() const override { return {next_, {}, 0}; }

 private:
  Pass pass_;
  int64_t next_;
  std::vector<int64_t> indices_;
};

// Worker w loads batches k = w, w + W, w + 2W, ... into a queue of its own, at most
// prefetch_factor ahead. Since every worker produces in increasing k, batch k is always
// at the front of worker k % W's queue when the consumer asks for it.
class WorkerStream : public BatchStream {
 public:
  WorkerStream(Pass pass, int64_t num_workers, int64_t prefetch_factor, std::shared_ptr<detail::WorkerPool> pool)
      : pass_(std::move(pass)),
        next_(pass_.begin_batch),
        queues_(static_cast<size_t>(num_workers), static_cast<size_t>(prefetch_factor), stop_),
        workers_(std::move(pool)) {
    try {
      workers_.start(num_workers, [this](int64_t w) { run(w); });
    } catch (...) {
      shutdown();
      throw;
    }
  }

  ~WorkerStream() override { shutdown(); }

  std::optional<Batch> next() override {
    // The worker that failed has stopped, so the pass cannot go on past its error.
    if (error_) std::rethrow_exception(error_);
    if (next_ >= pass_.end_batch) return std::nullopt;
    Item item = queues_.pop(static_cast<size_t>(next_ % num_workers()));
    ++next_;
    if (item.error) {
      error_ = item.error;
      std::rethrow_exception(error_);
    }
    return std::move(item.batch);
  }

  StreamPosition position() const override { return {next_, {}, 0}; }

 private:
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  int64_t num_workers() const { return static_cast<int64_t>(queues_.size()); }

  void run(int64_t w) {
    const auto slot = static_cast<size_t>(w);
    try {
      detail::use_one_intra_op_thread_in_this_thread();
    } catch (...) {
      // Only a speed setting: the worker loads correctly without it.
    }
    std::vector<int64_t> indices;
    const int64_t step = num_workers();
    int64_t k = pass_.begin_batch + ((w - pass_.begin_batch) % step + step) % step;
    for (; k < pass_.end_batch; k += step) {
      if (!queues_.wait_for_room(slot)) return;
      Item item;
      try {
        item.batch = pass_.load(k, indices);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      if (!queues_.push(slot, std::move(item)) || failed) return;
    }
  }

  void shutdown() {
    stop_ = true;
    queues_.close();
    workers_.wait();
  }

  Pass pass_;
  int64_t next_;
  std::atomic<bool> stop_{false};  // before the queues, which watch it
  detail::WorkerQueues<Item> queues_;
  std::exception_ptr error_;
  detail::PassWorkers workers_;  // last: destroyed (and waited for) before the queues
};

std::string given(int64_t value) { return std::to_string(value); }

}  // namespace

int64_t max_loader_workers() {
  return std::max<int64_t>(8, 4 * static_cast<int64_t>(std::thread::hardware_concurrency()));
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (!dataset_) {
    throw ConfigError(
        "DataLoader needs a data set, got nullptr. Pass a Dataset such as a "
        "TensorDataset or the result of load_mnist_format().");
  }
  check_options();
  const int64_t n = dataset_->size();
  if (options_.shuffle) {
    const uint64_t seed =
        options_.seed ? *options_.seed : at::detail::getDefaultCPUGenerator().current_seed();
    sampler_ = std::make_shared<RandomSampler>(n, seed);
  } else {
    sampler_ = std::make_shared<SequentialSampler>(n);
  }
}

DataLoader::DataLoader(std::shared_ptr<const IterableDataset> dataset, DataLoaderOptions options)
    : iterable_(std::move(dataset)), options_(std::move(options)) {
  if (!iterable_) {
    throw ConfigError(
        "DataLoader needs a data set, got a null IterableDataset. Pass a stream such as a ShardedDataset or your "
        "own IterableDataset.");
  }
  check_options();
  if (options_.shuffle) {
    throw ConfigError(
        "DataLoader: shuffle=true with an IterableDataset: a stream has no indices to permute (PyTorch refuses "
        "it too). Set shuffle=false and shuffle inside the data set, seeded with WorkerInfo::epoch.");
  }
}

DataLoader::~DataLoader() = default;

void DataLoader::check_options() const {
  if (options_.batch_size < 1) {
    throw ConfigError("DataLoader: batch_size must be at least 1, got " +
                      given(options_.batch_size) +
                      ". Set batch_size to a positive number, e.g. 64.");
  }
  if (options_.num_workers < 0) {
    throw ConfigError("DataLoader: num_workers must not be negative, got " +
                      given(options_.num_workers) +
                      ". Use 0 to load on the calling thread or N > 0 for N background threads.");
  }
  if (options_.num_workers > max_loader_workers()) {
    throw ConfigError("DataLoader: num_workers=" + given(options_.num_workers) + " is more than " +
                      given(max_loader_workers()) + " (4 per core of this machine). Use 0 to " +
                      given(max_loader_workers()) + "; a few workers per core already keep a loader ahead.");
  }
  if (options_.prefetch_factor > 1024) {
    throw ConfigError("DataLoader: prefetch_factor=" + given(options_.prefetch_factor) +
                      " is more than 1024 batches per worker. Use a small number; the default is 2.");
  }
  if (options_.prefetch_factor < 1) {
    throw ConfigError("DataLoader: prefetch_factor must be at least 1, got " +
                      given(options_.prefetch_factor) +
                      ". It is how many batches each worker prepares ahead; the default is 2.");
  }
  if (options_.persistent_workers && options_.num_workers == 0) {
    throw ConfigError(
        "DataLoader: persistent_workers=true with num_workers=0: there are no workers to keep (PyTorch refuses it "
        "too). Set num_workers to 1 or more, or persistent_workers=false.");
  }
}

int64_t DataLoader::num_batches() const {
  if (!has_length()) {
    throw ConfigError(
        "DataLoader::num_batches: this loader reads an IterableDataset, which has no length; its batch count is "
        "known only when the stream ends. Check has_length() first (the Trainer runs such a loader until its "
        "stream ends; limit_train_batches=N caps it).");
  }
  const int64_t n = sampler_->size();
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0 ? 1 : 0);  // no n + b - 1: b may be near INT64_MAX
}

int64_t DataLoader::num_examples() const {
  if (!has_length()) {
    throw ConfigError(
        "DataLoader::num_examples: this loader reads an IterableDataset, which has no length. Check has_length() "
        "first.");
  }
  return sampler_->size();
}

void DataLoader::set_sampler(std::shared_ptr<const Sampler> sampler) {
  if (!has_length()) {
    throw ConfigError(
        "DataLoader::set_sampler on a loader over an IterableDataset: a stream has no indices to sample. Shard "
        "the stream inside the data set with WorkerInfo (shard_indices), and set_distributed for ddp.");
  }
  if (!sampler) {
    throw ConfigError(
        "DataLoader::set_sampler: got nullptr. Pass a Sampler, e.g. "
        "std::make_shared<SequentialSampler>(n).");
  }
  sampler_ = std::move(sampler);
}

void DataLoader::set_distributed(int64_t world_size, int64_t rank) {
  if (has_length()) {
    throw ConfigError(
        "DataLoader::set_distributed is for a loader over an IterableDataset; a map-style loader shares its data "
        "between ranks with a DistributedSampler (set_sampler).");
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw ConfigError("DataLoader::set_distributed: rank " + given(rank) + " of world_size " + given(world_size) +
                      " is not a ddp place; world_size must be at least 1 and rank in 0.." +
                      given(world_size - 1) + ".");
  }
  world_size_ = world_size;
  rank_ = rank;
}

std::shared_ptr<detail::WorkerPool> DataLoader::pool() const {
  if (!options_.persistent_workers) return nullptr;
  if (!pool_) pool_ = std::make_shared<detail::WorkerPool>(options_.num_workers);
  return pool_;
}

std::unique_ptr<BatchStream> DataLoader::stream(int64_t skip_batches) const {
  if (skip_batches < 0) {
    throw ConfigError("DataLoader::stream: skip_batches must not be negative, got " +
                      given(skip_batches) + ".");
  }
  if (!has_length()) {
    if (skip_batches != 0) {
      throw ConfigError("DataLoader::stream: skip_batches=" + given(skip_batches) +
                        " on a loader over an IterableDataset; a stream resumes from a StreamPosition "
                        "(stream(position)), which says how far each worker's iterator got.");
    }
    return stream(StreamPosition{});
  }
  Pass pass;
  pass.dataset = dataset_;
  pass.collate = options_.collate;
  pass.order = sampler_->indices(epoch_);
  if (static_cast<int64_t>(pass.order.size()) != sampler_->size()) {
    throw Error("DataLoader: the sampler's indices(" + given(epoch_) + ") returned " +
                given(static_cast<int64_t>(pass.order.size())) + " indices but its size() is " +
                given(sampler_->size()) + ". A Sampler must yield size() indices every epoch.");
  }
  pass.batch_size = options_.batch_size;
  pass.end_batch = num_batches();
  pass.begin_batch = std::min(skip_batches, pass.end_batch);
  pass.pin = options_.pin_memory && at::hasCUDA();
  dataset_->set_epoch(epoch_);
  if (options_.num_workers == 0 || pass.begin_batch == pass.end_batch) {
    return std::make_unique<InlineStream>(std::move(pass));
  }
  return std::make_unique<WorkerStream>(std::move(pass), options_.num_workers, options_.prefetch_factor, pool());
}

std::unique_ptr<BatchStream> DataLoader::stream(const StreamPosition& from) const {
  if (has_length()) return stream(from.batches);
  const int64_t readers = num_readers();
  if (from.batches < 0 || from.next_worker < 0 || from.next_worker >= readers ||
      (!from.examples.empty() && static_cast<int64_t>(from.examples.size()) != readers) ||
      (from.examples.empty() && from.batches > 0)) {
    throw ConfigError("DataLoader::stream: the stream position (" + given(from.batches) + " batches, " +
                      given(static_cast<int64_t>(from.examples.size())) + " worker counts, next worker " +
                      given(from.next_worker) + ") does not fit this loader's " + given(readers) +
                      " reader(s): a stream is sharded by worker, so it resumes only with the worker count it was "
                      "read with. Set num_workers=" +
                      (from.examples.size() <= 1 ? std::string("0 or 1") : given(static_cast<int64_t>(from.examples.size()))) +
                      " (or start the epoch afresh).");
  }
  for (int64_t count : from.examples) {
    if (count < 0) {
      throw ConfigError("DataLoader::stream: the stream position holds a negative example count (" + given(count) +
                        "); it is damaged.");
    }
  }
  detail::StreamPass pass;
  pass.dataset = iterable_;
  pass.collate = options_.collate;
  pass.batch_size = options_.batch_size;
  pass.drop_last = options_.drop_last;
  pass.pin = options_.pin_memory && at::hasCUDA();
  pass.info.epoch = epoch_;
  pass.info.rank = rank_;
  pass.info.world_size = world_size_;
  pass.info.num_workers = readers;
  pass.from = from;
  return detail::make_iterable_stream(std::move(pass), options_.num_workers, options_.prefetch_factor, pool());
}

}  // namespace volt::data
