#include "volt/callbacks/batch_size_finder.h"

#include <atomic>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <torch/optim/optimizer.h>

#include "callbacks/detail/optimizer_snapshot.h"
#include "volt/core/compat.h"
#include "volt/core/error.h"
#include "volt/core/trainer_view.h"

// LibTorch 2.3 made Allocator::allocate non-const and added the pure copy_data.
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
#define VOLT_ALLOCATE_CONST
#else
#define VOLT_ALLOCATE_CONST const
#endif

namespace volt::callbacks {
namespace {

/// LibTorch's CPU allocator with a count of the bytes it hands out. Pointers are kept in a table (not
/// in a context of their own) so that raw_allocate/raw_deleter keep working for LibTorch's callers.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) VOLT_ALLOCATE_CONST override {
    c10::DataPtr d = inner_->allocate(n);
    if (d.get() == nullptr || d.get() != d.get_context()) return d;  // nothing to count, or not ours to wrap
    const c10::DeleterFnPtr original = d.get_deleter();
    const c10::Device device = d.device();
    void* p = d.release_context();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      table_[p] = {static_cast<int64_t>(n), original};
      live_ += static_cast<int64_t>(n);
      if (live_ > peak_) peak_ = live_;
    }
    return {p, p, &CountingAllocator::release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::release; }
#if VOLT_TORCH_VERSION_AT_LEAST(2, 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  static void release(void* p) {
    CountingAllocator& self = *instance_;
    c10::DeleterFnPtr original = nullptr;
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      const auto it = self.table_.find(p);
      if (it == self.table_.end()) return;  // cannot happen: every pointer handed out is in the table
      original = it->second.deleter;
      self.live_ -= it->second.bytes;
      self.table_.erase(it);
    }
    original(p);
  }

  CpuMemoryStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {live_, peak_};
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = live_;
  }

  static CountingAllocator* instance_;

 private:
  struct Entry {
    int64_t bytes;
    c10::DeleterFnPtr deleter;
  };
  c10::Allocator* inner_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Entry> table_;
  mutable int64_t live_ = 0;
  mutable int64_t peak_ = 0;
};

CountingAllocator* CountingAllocator::instance_ = nullptr;
std::once_flag g_install;

}  // namespace

void track_cpu_memory() {
  std::call_once(g_install, [] {
    // Never freed: tensors allocated through it may outlive any owner.
    CountingAllocator::instance_ = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(CountingAllocator::instance_, std::numeric_limits<uint8_t>::max());
  });
}

CpuMemoryStats cpu_memory() {
  return CountingAllocator::instance_ ? CountingAllocator::instance_->stats() : CpuMemoryStats{};
}

void reset_cpu_memory_peak() {
  if (CountingAllocator::instance_) CountingAllocator::instance_->reset_peak();
}

int64_t available_system_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

struct BatchSizeFinder::Snapshot {
  explicit Snapshot(torch::optim::Optimizer& optimizer) : optimizer(optimizer) {}
  detail::OptimizerSnapshot optimizer;
};

BatchSizeFinder::BatchSizeFinder(int64_t budget_bytes) : budget_(budget_bytes) {
  if (budget_bytes < 0) {
    throw ConfigError("BatchSizeFinder: budget_bytes=" + std::to_string(budget_bytes) +
                      " is negative. Give the CPU memory a trial may use in bytes, or 0 for no budget.");
  }
}

BatchSizeFinder::~BatchSizeFinder() = default;

void BatchSizeFinder::on_fit_start(TrainerView& view) {
  track_cpu_memory();
  snapshot_.reset();
  if (!view.optimizers().empty()) snapshot_ = std::make_unique<Snapshot>(*view.optimizers()[0]);
  base_ = cpu_memory().live;
  reset_cpu_memory_peak();
  peak_ = 0;
  over_ = false;
}

void BatchSizeFinder::measure() {
  const CpuMemoryStats now = cpu_memory();
  peak_ = std::max(peak_, now.peak - base_);
  if (budget_ > 0 && peak_ > budget_) over_ = true;
}

void BatchSizeFinder::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) {
  measure();
  // All ranks take the same decision at every step, so that they stop together.
  bool over = over_;
  if (view.state().world_size > 1) over = view.reduce_boolean_decision(over, /*all=*/false);
  if (over) {
    over_ = true;
    view.request_stop("the batch-size trial went over its CPU memory budget of " + std::to_string(budget_) +
                      " bytes (" + std::to_string(peak_) + " bytes)");
  }
}

void BatchSizeFinder::restore() {
  if (snapshot_) snapshot_->optimizer.restore();
  snapshot_.reset();
}

void BatchSizeFinder::on_fit_end(TrainerView&) {
  restore();
}

void BatchSizeFinder::on_exception(TrainerView&, const std::exception&) {
  restore();
}

}  // namespace volt::callbacks
