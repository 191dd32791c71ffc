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

/// One bounded queue per worker of a pass: worker w pushes what it prepared into queue w
/// (waiting while it holds `capacity` items), the consumer pops from the queue whose turn it
/// is. `stop` (the pass's flag) ends every wait; close() wakes the waiters after it is set.
template <typename Item>
class WorkerQueues {
 public:
  WorkerQueues(size_t n, size_t capacity, const std::atomic<bool>& stop)
      : queues_(n), capacity_(capacity), stop_(stop) {}

  size_t size() const { return queues_.size(); }

  /// Waits for room in queue w; false when the pass is stopping.
  bool wait_for_room(size_t w) {
    Queue& q = queues_[w];
    std::unique_lock<std::mutex> lock(q.mutex);
    q.changed.wait(lock, [&] { return stop_.load() || q.items.size() < capacity_; });
    return !stop_.load();
  }

  /// Appends to queue w; false (and nothing appended) when the pass is stopping.
  bool push(size_t w, Item item) {
    Queue& q = queues_[w];
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      if (stop_.load()) return false;
      q.items.push_back(std::move(item));
    }
    q.changed.notify_all();
    return true;
  }

  /// Waits for queue w's next item and takes it.
  Item pop(size_t w) {
    Queue& q = queues_[w];
    Item item;
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      q.changed.wait(lock, [&] { return !q.items.empty(); });
      item = std::move(q.items.front());
      q.items.pop_front();
    }
    q.changed.notify_all();
    return item;
  }

  /// Wakes every waiter after `stop` was set.
  void close() {
    for (auto& q : queues_) {
      // Taking the lock orders the store before any wait that has not yet checked it.
      { std::lock_guard<std::mutex> lock(q.mutex); }
      q.changed.notify_all();
    }
  }

 private:
  struct Queue {
    std::mutex mutex;
    std::condition_variable changed;  // the worker waits for room, the consumer for an item
    std::deque<Item> items;
  };
  std::deque<Queue> queues_;  // deque: Queue holds a mutex and cannot move
  size_t capacity_;
  const std::atomic<bool>& stop_;
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
