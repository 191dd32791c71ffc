#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace volt::data {
namespace detail {

/// Each loader worker gathers with one intra-op thread (see worker_pool.cpp for why).
void use_one_intra_op_thread_in_this_thread();

/// The threads of a loader with persistent_workers: thread w runs the tasks posted to slot w,
/// in order, until the pool is destroyed. `busy` marks the pass that uses them.
class WorkerPool {
 public:
  explicit WorkerPool(int64_t num_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(int64_t worker, std::function<void()> task);
  int64_t size() const { return static_cast<int64_t>(threads_.size()); }
  std::atomic<bool> busy{false};

 private:
  struct Slot {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::function<void()>> tasks;
    bool stop = false;
  };
  void run(Slot& slot);

  std::deque<Slot> slots_;  // deque: Slot holds a mutex and cannot move
  std::vector<std::thread> threads_;
};

/// Runs fn(0) .. fn(n-1) of one pass concurrently, on fresh threads or on a WorkerPool, and
/// waits for all of them (wait(), which the pass calls before its state goes away). On a pool
/// it holds the pool for the pass: a second pass while one is alive is an Error.
class PassWorkers {
 public:
  explicit PassWorkers(std::shared_ptr<WorkerPool> pool);
  ~PassWorkers();
  PassWorkers(const PassWorkers&) = delete;
  PassWorkers& operator=(const PassWorkers&) = delete;

  void start(int64_t n, const std::function<void(int64_t)>& fn);
  void wait();

 private:
  std::shared_ptr<WorkerPool> pool_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable finished_;
  int64_t running_ = 0;
};

}  // namespace detail
}  // namespace volt::data
