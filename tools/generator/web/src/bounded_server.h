// An httplib::Server whose connections have a deadline per request, not only per read.
//
// cpp-httplib waits for each read with a timeout, so a client that sends its request a byte now and then
// (slowloris) keeps its worker thread for as long as it likes; enough such clients hold every worker and the
// page answers nobody. BoundedServer serves each connection with its own loop and stream: one request (head
// and body) must arrive, and its answer be sent, within request_timeout; a client that stops sending is
// dropped after io_timeout; a connection is closed after max_requests requests. Bytes a client sent ahead
// (pipelined requests) are kept for the next request, which cpp-httplib 0.11's own stream drops.
//
// The loop uses the hooks cpp-httplib 0.11 declares (the virtual process_and_close_socket, the protected
// process_request and the Stream interface); later versions changed them, and there the plain server is used
// (VOLT_HTTPLIB_0_11 is set by CMake for cpp-httplib 0.11 only).
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace volt::generator::web::detail {

/// The server's task queue: a fixed number of worker threads, one connection each at a time; the rest wait.
/// (httplib::ThreadPool would do, but in cpp-httplib 0.18 its inline worker calls OpenSSL, which Debian's
/// pkg-config file does not link; and enqueue's signature changed between the versions.)
class WorkerPool : public httplib::TaskQueue {
 public:
  explicit WorkerPool(std::size_t threads) {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
#if VOLT_HTTPLIB_0_11
  void enqueue(std::function<void()> fn) override {
    push(std::move(fn));
  }
#else
  bool enqueue(std::function<void()> fn) override {
    push(std::move(fn));
    return true;
  }
#endif
  /// Runs what is queued, then joins the workers.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(fn));
    }
    ready_.notify_one();
  }
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  std::mutex mutex_;
  std::condition_variable ready_;
  bool stopping_ = false;
};

/// Limits of one connection.
struct ConnectionLimits {
  std::chrono::milliseconds io_timeout{5000};        ///< the longest wait for any next byte (or to send)
  std::chrono::milliseconds request_timeout{10000};  ///< one whole request and its answer
  std::chrono::milliseconds keep_alive{1000};        ///< the wait for the next request on an open connection
  std::size_t max_requests = 100;                    ///< requests per connection
};

#if VOLT_HTTPLIB_0_11

/// True when this build enforces ConnectionLimits::request_timeout.
inline constexpr bool kRequestDeadline = true;

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(ConnectionLimits limits) : limits_(limits) {}

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionLimits limits_;
};

#else

inline constexpr bool kRequestDeadline = false;

/// Another cpp-httplib: its own loop, with the per-read timeouts and the request count only.
class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(ConnectionLimits limits) {
    set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits.io_timeout).count(), 0);
    set_write_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits.io_timeout).count(), 0);
    set_keep_alive_max_count(limits.max_requests);
  }
};

#endif

}  // namespace volt::generator::web::detail
