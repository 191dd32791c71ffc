#include "data/detail/worker_pool.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <utility>

#include "volt/core/error.h"

namespace volt::data::detail {

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

WorkerPool::WorkerPool(int64_t num_threads) : slots_(static_cast<size_t>(num_threads)) {
  try {
    threads_.reserve(slots_.size());
    for (auto& slot : slots_) threads_.emplace_back([this, &slot] { run(slot); });
  } catch (...) {
    for (auto& slot : slots_) {
      std::lock_guard<std::mutex> lock(slot.mutex);
      slot.stop = true;
      slot.changed.notify_all();
    }
    for (auto& t : threads_) t.join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  for (auto& slot : slots_) {
    std::lock_guard<std::mutex> lock(slot.mutex);
    slot.stop = true;
    slot.changed.notify_all();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkerPool::post(int64_t worker, std::function<void()> task) {
  Slot& slot = slots_[static_cast<size_t>(worker)];
  {
    std::lock_guard<std::mutex> lock(slot.mutex);
    slot.tasks.push_back(std::move(task));
  }
  slot.changed.notify_all();
}

void WorkerPool::run(Slot& slot) {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(slot.mutex);
      slot.changed.wait(lock, [&] { return slot.stop || !slot.tasks.empty(); });
      if (slot.tasks.empty()) return;  // stopped, nothing left to run
      task = std::move(slot.tasks.front());
      slot.tasks.pop_front();
    }
    task();
  }
}

PassWorkers::PassWorkers(std::shared_ptr<WorkerPool> pool) : pool_(std::move(pool)) {
  bool idle = false;
  if (pool_ && !pool_->busy.compare_exchange_strong(idle, true)) {
    throw Error(
        "DataLoader: a pass of this loader is still running on its persistent workers; finish it (or destroy its "
        "stream) before starting another. With persistent_workers a loader serves one pass at a time; use two "
        "loaders to read one data set twice at once.");
  }
}

PassWorkers::~PassWorkers() {
  wait();
  if (pool_) pool_->busy = false;
}

void PassWorkers::start(int64_t n, const std::function<void(int64_t)>& fn) {
  if (!pool_) {
    threads_.reserve(static_cast<size_t>(n));
    for (int64_t w = 0; w < n; ++w) threads_.emplace_back([fn, w] { fn(w); });
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = n;
  }
  for (int64_t w = 0; w < n; ++w) {
    pool_->post(w, [this, fn, w] {
      fn(w);
      // Notified under the lock: wait() cannot return (and this object go) before it is released.
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
      finished_.notify_all();
    });
  }
}

void PassWorkers::wait() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return running_ == 0; });
}

}  // namespace volt::data::detail
