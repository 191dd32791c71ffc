#include "data/detail/iterable_streams.h"

#include <ATen/core/Tensor.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "volt/core/error.h"

namespace volt::data::detail {
namespace {

std::string message_of(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

// One reader of a pass: its iterator, opened lazily on the reader's thread, and its batching.
class Reader {
 public:
  Reader(const StreamPass& pass, int64_t worker) : pass_(pass), info_(pass.info) {
    info_.worker_id = worker;
    if (!pass.from.examples.empty()) delivered_ = pass.from.examples[static_cast<size_t>(worker)];
  }

  /// The next batch and its example count; nullopt at the end of this reader's stream.
  std::optional<Batch> next(int64_t& count) {
    if (ended_) return std::nullopt;
    if (!it_) open();
    std::vector<Batch> examples;
    examples.reserve(static_cast<size_t>(pass_.batch_size));
    const int64_t first = delivered_;
    while (static_cast<int64_t>(examples.size()) < pass_.batch_size) {
      std::optional<Batch> example;
      try {
        example = it_->next();
      } catch (const std::exception& e) {
        throw DataError(where() + ", example " + std::to_string(first + static_cast<int64_t>(examples.size())) +
                        " of its stream: " + message_of(e));
      }
      if (!example) {
        ended_ = true;
        break;
      }
      examples.push_back(std::move(*example));
    }
    const auto n = static_cast<int64_t>(examples.size());
    if (n == 0 || (ended_ && pass_.drop_last && n < pass_.batch_size)) return std::nullopt;
    const std::string batch_where = where() + ", examples " + std::to_string(first) + ".." +
                                    std::to_string(first + n - 1) + " of its stream";
    Batch batch;
    try {
      batch = pass_.collate ? pass_.collate(std::move(examples)) : stack_examples(examples, batch_where);
    } catch (const DataError&) {
      throw;
    } catch (const std::exception& e) {
      throw DataError(batch_where + ": collate failed: " + message_of(e));
    }
    if (pass_.pin) {
      for (auto& t : batch) {
        if (t.defined()) t = t.pin_memory();
      }
    }
    delivered_ += n;
    count = n;
    return batch;
  }

 private:
  std::string where() const { return "DataLoader (" + info_.to_string() + ")"; }

  void open() {
    try {
      it_ = pass_.dataset->open(info_);
    } catch (const std::exception& e) {
      throw DataError(where() + ": IterableDataset::open failed: " + message_of(e));
    }
    if (!it_) {
      throw Error(where() + ": IterableDataset::open returned nullptr. Return an iterator (an empty one for a reader "
                            "without examples).");
    }
    if (delivered_ > 0) {
      int64_t skipped = 0;
      try {
        skipped = it_->skip(delivered_);
      } catch (const std::exception& e) {
        throw DataError(where() + ": resuming at example " + std::to_string(delivered_) +
                        " of its stream failed: " + message_of(e));
      }
      if (skipped < delivered_) ended_ = true;  // the stream is shorter now than when the position was taken
    }
  }

  const StreamPass& pass_;
  WorkerInfo info_;
  std::unique_ptr<ExampleIterator> it_;
  int64_t delivered_ = 0;
  bool ended_ = false;
};

class InlineIterableStream : public BatchStream {
 public:
  explicit InlineIterableStream(StreamPass pass) : pass_(std::move(pass)), reader_(pass_, 0) {
    position_ = pass_.from;
    if (position_.examples.empty()) position_.examples.assign(1, 0);
    position_.next_worker = 0;
  }

  std::optional<Batch> next() override {
    int64_t count = 0;
    auto batch = reader_.next(count);
    if (batch) {
      position_.examples[0] += count;
      position_.batches += 1;
    }
    return batch;
  }

  StreamPosition position() const override { return position_; }

 private:
  StreamPass pass_;
  Reader reader_;
  StreamPosition position_;
};

// Worker w reads its own iterator into a queue of its own, at most prefetch_factor batches
// ahead; the consumer takes one batch from each worker in turn (skipping workers whose stream
// ended), so the order depends on the worker count only, not on timing.
class WorkerIterableStream : public BatchStream {
 public:
  WorkerIterableStream(StreamPass pass, int64_t num_workers, int64_t prefetch_factor,
                       std::shared_ptr<WorkerPool> pool)
      : pass_(std::move(pass)),
        queues_(static_cast<size_t>(num_workers), static_cast<size_t>(prefetch_factor), stop_),
        done_(static_cast<size_t>(num_workers), false),
        remaining_(num_workers),
        workers_(std::move(pool)) {
    position_ = pass_.from;
    if (position_.examples.empty()) position_.examples.assign(static_cast<size_t>(num_workers), 0);
    try {
      workers_.start(num_workers, [this](int64_t w) { run(w); });
    } catch (...) {
      shutdown();
      throw;
    }
  }

  ~WorkerIterableStream() override { shutdown(); }

  std::optional<Batch> next() override {
    if (error_) std::rethrow_exception(error_);
    while (remaining_ > 0) {
      const auto w = static_cast<size_t>(position_.next_worker);
      Item item = queues_.pop(w);
      if (item.error) {
        error_ = item.error;
        std::rethrow_exception(error_);
      }
      if (item.end) {
        done_[w] = true;
        --remaining_;
        advance();
        continue;
      }
      position_.examples[w] += item.count;
      position_.batches += 1;
      advance();
      return std::move(item.batch);
    }
    return std::nullopt;
  }

  StreamPosition position() const override { return position_; }

 private:
  struct Item {
    Batch batch;
    int64_t count = 0;
    bool end = false;
    std::exception_ptr error;
  };
  int64_t num_workers() const { return static_cast<int64_t>(queues_.size()); }

  void advance() {
    if (remaining_ == 0) return;
    do {
      position_.next_worker = (position_.next_worker + 1) % num_workers();
    } while (done_[static_cast<size_t>(position_.next_worker)]);
  }

  void run(int64_t w) {
    const auto slot = static_cast<size_t>(w);
    try {
      use_one_intra_op_thread_in_this_thread();
    } catch (...) {
      // Only a speed setting: the worker reads correctly without it.
    }
    Reader reader(pass_, w);
    for (;;) {
      if (!queues_.wait_for_room(slot)) return;
      Item item;
      try {
        auto batch = reader.next(item.count);
        if (batch) {
          item.batch = std::move(*batch);
        } else {
          item.end = true;
        }
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool last = item.end || item.error != nullptr;
      if (!queues_.push(slot, std::move(item)) || last) return;
    }
  }

  void shutdown() {
    stop_ = true;
    queues_.close();
    workers_.wait();
  }

  StreamPass pass_;
  std::atomic<bool> stop_{false};  // before the queues, which watch it
  WorkerQueues<Item> queues_;
  std::vector<bool> done_;
  int64_t remaining_;
  StreamPosition position_;
  std::exception_ptr error_;
  PassWorkers workers_;  // last: destroyed (and waited for) before the queues
};

}  // namespace

std::unique_ptr<BatchStream> make_iterable_stream(StreamPass pass, int64_t num_workers, int64_t prefetch_factor,
                                                  std::shared_ptr<WorkerPool> pool) {
  if (num_workers == 0) return std::make_unique<InlineIterableStream>(std::move(pass));
  pass.info.num_workers = num_workers;
  return std::make_unique<WorkerIterableStream>(std::move(pass), num_workers, prefetch_factor, std::move(pool));
}

}  // namespace volt::data::detail
