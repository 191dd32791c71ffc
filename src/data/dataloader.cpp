#include "volt/data/dataloader.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Config.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "volt/core/error.h"

namespace volt::data {
namespace {

// An OpenMP parallel region opened from a std::thread gets a team of its own, so every
// worker would add get_num_threads() threads next to the training thread's team. OpenMP's
// thread count is a per-thread setting (at::set_num_threads also rewrites the process-wide
// default), so each worker gathers with one thread. Volt does not link libgomp itself;
// LibTorch has loaded it, hence the lookup rather than a direct call.
void use_one_intra_op_thread_in_this_thread() {
#if AT_PARALLEL_OPENMP
  // LibTorch sets each thread's count lazily, at its first parallel_for, and would then
  // overwrite ours; get_num_threads() runs that initialisation now. (Calling
  // at::internal::lazy_init_num_threads() here would not: since 2.x its once-per-thread
  // flag is not exported, so this file would flip a copy of its own.)
  (void)at::get_num_threads();
  using SetNumThreads = void (*)(int);
  static const auto omp_set_num_threads =
      reinterpret_cast<SetNumThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (omp_set_num_threads != nullptr) omp_set_num_threads(1);
#endif
}

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
  WorkerStream(Pass pass, int64_t num_workers, int64_t prefetch_factor)
      : pass_(std::move(pass)),
        prefetch_(static_cast<size_t>(prefetch_factor)),
        next_(pass_.begin_batch),
        queues_(static_cast<size_t>(num_workers)) {
    try {
      threads_.reserve(queues_.size());
      for (int64_t w = 0; w < num_workers; ++w) threads_.emplace_back([this, w] { run(w); });
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
    Queue& q = queues_[static_cast<size_t>(next_ % num_workers())];
    Item item;
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      q.changed.wait(lock, [&] { return !q.items.empty(); });
      item = std::move(q.items.front());
      q.items.pop_front();
    }
    q.changed.notify_all();
    ++next_;
    if (item.error) {
      error_ = item.error;
      std::rethrow_exception(error_);
    }
    return std::move(item.batch);
  }

 private:
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  struct Queue {
    std::mutex mutex;
    std::condition_variable changed;  // the worker waits for room, the consumer for an item
    std::deque<Item> items;
  };

  int64_t num_workers() const { return static_cast<int64_t>(queues_.size()); }

  void run(int64_t w) {
    Queue& q = queues_[static_cast<size_t>(w)];
    try {
      use_one_intra_op_thread_in_this_thread();
    } catch (...) {
      // Only a speed setting: the worker loads correctly without it.
    }
    std::vector<int64_t> indices;
    const int64_t step = num_workers();
    int64_t k = pass_.begin_batch + ((w - pass_.begin_batch) % step + step) % step;
    for (; k < pass_.end_batch; k += step) {
      {
        std::unique_lock<std::mutex> lock(q.mutex);
        q.changed.wait(lock, [&] { return stop_.load() || q.items.size() < prefetch_; });
        if (stop_) return;
      }
      Item item;
      try {
        item.batch = pass_.load(k, indices);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(q.mutex);
        if (stop_) return;
        q.items.push_back(std::move(item));
      }
      q.changed.notify_all();
      if (failed) return;
    }
  }

  void shutdown() {
    stop_ = true;
    for (auto& q : queues_) {
      // Taking the lock orders the store before any wait that has not yet checked it.
      { std::lock_guard<std::mutex> lock(q.mutex); }
      q.changed.notify_all();
    }
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  Pass pass_;
  size_t prefetch_;
  int64_t next_;
  std::deque<Queue> queues_;  // deque: Queue holds a mutex and cannot move
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
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
  const int64_t n = dataset_->size();
  if (options_.shuffle) {
    const uint64_t seed =
        options_.seed ? *options_.seed : at::detail::getDefaultCPUGenerator().current_seed();
    sampler_ = std::make_shared<RandomSampler>(n, seed);
  } else {
    sampler_ = std::make_shared<SequentialSampler>(n);
  }
}

int64_t DataLoader::num_batches() const {
  const int64_t n = sampler_->size();
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : n / b + (n % b != 0 ? 1 : 0);  // no n + b - 1: b may be near INT64_MAX
}

int64_t DataLoader::num_examples() const { return sampler_->size(); }

void DataLoader::set_sampler(std::shared_ptr<const Sampler> sampler) {
  if (!sampler) {
    throw ConfigError(
        "DataLoader::set_sampler: got nullptr. Pass a Sampler, e.g. "
        "std::make_shared<SequentialSampler>(n).");
  }
  sampler_ = std::move(sampler);
}

std::unique_ptr<BatchStream> DataLoader::stream(int64_t skip_batches) const {
  if (skip_batches < 0) {
    throw ConfigError("DataLoader::stream: skip_batches must not be negative, got " +
                      given(skip_batches) + ".");
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
  if (options_.num_workers == 0 || pass.begin_batch == pass.end_batch) {
    return std::make_unique<InlineStream>(std::move(pass));
  }
  return std::make_unique<WorkerStream>(std::move(pass), options_.num_workers,
                                        options_.prefetch_factor);
}

}  // namespace volt::data
