#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>

namespace volt::loggers {

/// The pending rows (or records) of a logger that writes in the background: they wait in a
/// `Buffer` (a std::vector or std::string) until the owner writes them (save(), a full
/// buffer) or, at the latest, `max_delay` after the first of them arrived, when a background
/// thread calls `write`. A failed background write is kept and rethrown to the owner's
/// thread at its next add() or raise_error(). For loggers of your own as much as Volt's
/// (CSVLogger, TensorBoardLogger).
template <typename Buffer>
class DelayedBuffer {
 public:
  using Clock = std::chrono::steady_clock;

  /// `write` runs on the background thread: it take()s the buffer and writes it (and
  /// put_back()s what it could not write before it throws).
  explicit DelayedBuffer(std::function<void()> write) : write_(std::move(write)) {}
  ~DelayedBuffer() { stop(); }
  DelayedBuffer(const DelayedBuffer&) = delete;
  DelayedBuffer& operator=(const DelayedBuffer&) = delete;

  /// The longest a row waits for the background write (validated by the owner first).
  void set_max_delay(std::chrono::duration<double> delay) {
    std::lock_guard<std::mutex> lock(mutex_);
    max_delay_ = std::chrono::duration_cast<Clock::duration>(delay);
  }

  /// Adds through `add(Buffer&)`, which returns true when the owner should write at once
  /// (the buffer is full). Rethrows a background write's error first. Starts the
  /// background thread on first use.
  template <typename Add>
  bool add(Add&& add) {
    bool write_now = false;
    bool start = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
      if (pending_.empty()) {
        // One clock read per buffered batch, not per row.
        oldest_ = Clock::now();
        if (thread_.joinable()) changed_.notify_one();
      }
      write_now = add(pending_);
      start = !thread_.joinable() && !stop_;
      if (start && !write_now) thread_ = std::thread([this] { run(); });
    }
    return write_now;
  }

  /// Takes everything pending (an empty buffer when nothing is).
  Buffer take() {
    Buffer out;
    std::lock_guard<std::mutex> lock(mutex_);
    out.swap(pending_);
    changed_.notify_one();
    return out;
  }

  /// Puts back what a failed write took, ahead of what arrived since.
  void put_back(Buffer taken) {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.insert(taken.end(), std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
    pending_.swap(taken);
  }

  bool empty() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_.empty();
  }
  /// What is pending: rows of a std::vector, bytes of a std::string.
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_.size();
  }

  /// Rethrows (once) the error of a failed background write.
  void raise_error() {
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
  }

  /// Ends the background thread (what is pending stays for the owner to write).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (pending_.empty()) {
        changed_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        continue;
      }
      const auto due = oldest_ + max_delay_;
      if (Clock::now() < due) {
        changed_.wait_until(lock, due, [&] { return stop_ || pending_.empty(); });
        continue;
      }
      lock.unlock();
      try {
        write_();
      } catch (...) {
        std::lock_guard<std::mutex> relock(mutex_);
        if (!error_) error_ = std::current_exception();
        stop_ = true;  // the owner's thread reports it; writing on would fail the same way
        return;
      }
      lock.lock();
    }
  }

  std::function<void()> write_;
  mutable std::mutex mutex_;  // the members below
  std::condition_variable changed_;
  Buffer pending_;
  Clock::time_point oldest_;
  Clock::duration max_delay_ = std::chrono::seconds(2);
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace volt::loggers
