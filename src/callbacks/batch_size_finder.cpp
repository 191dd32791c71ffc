#include "volt/callbacks/batch_size_finder.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
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
#include "volt/core/printable.h"

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

struct BatchSizeTrial::Snapshot {
  explicit Snapshot(torch::optim::Optimizer& optimizer) : optimizer(optimizer) {}
  detail::OptimizerSnapshot optimizer;
};

BatchSizeTrial::BatchSizeTrial(int64_t budget_bytes) : budget_(budget_bytes) {
  if (budget_bytes < 0) {
    throw ConfigError("BatchSizeTrial: budget_bytes=" + std::to_string(budget_bytes) +
                      " is negative. Give the CPU memory a trial may use in bytes, or 0 for no budget.");
  }
}

BatchSizeTrial::~BatchSizeTrial() = default;

void BatchSizeTrial::on_fit_start(TrainerView& view) {
  track_cpu_memory();
  snapshot_.reset();
  if (!view.optimizers().empty()) snapshot_ = std::make_unique<Snapshot>(*view.optimizers()[0]);
  base_ = cpu_memory().live;
  reset_cpu_memory_peak();
  peak_ = 0;
  over_ = false;
}

void BatchSizeTrial::measure() {
  const CpuMemoryStats now = cpu_memory();
  peak_ = std::max(peak_, now.peak - base_);
  if (budget_ > 0 && peak_ > budget_) over_ = true;
}

void BatchSizeTrial::on_train_batch_end(TrainerView& view, const at::Tensor&, const Batch&, int64_t) {
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

void BatchSizeTrial::restore() {
  if (snapshot_) snapshot_->optimizer.restore();
  snapshot_.reset();
}

void BatchSizeTrial::on_fit_end(TrainerView&) {
  restore();
}

void BatchSizeTrial::on_exception(TrainerView&, const std::exception&) {
  restore();
}

namespace {

std::string num(double v) { return exact_number_text(v); }

}  // namespace

void check_batch_size_finder_options(const BatchSizeFinderOptions& o, const std::string& what) {
  if (o.mode != "power" && o.mode != "binsearch") {
    throw ConfigError(what + " mode='" + o.mode + "' is not known. Use power or binsearch.");
  }
  if (o.steps_per_trial < 1) {
    throw ConfigError(what + " steps_per_trial=" + std::to_string(o.steps_per_trial) +
                      " must be at least 1 (default 3).");
  }
  if (o.init_val < 1) {
    throw ConfigError(what + " init_val=" + std::to_string(o.init_val) +
                      " is not a batch size. Use 1 or more (default 2).");
  }
  if (o.max_trials < 1) {
    throw ConfigError(what + " max_trials=" + std::to_string(o.max_trials) + " must be at least 1 (default 25).");
  }
  if (o.memory_budget_bytes < 0) {
    throw ConfigError(what + " memory_budget_bytes=" + std::to_string(o.memory_budget_bytes) +
                      " is negative. Give bytes, or 0 to use memory_fraction of the available memory.");
  }
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0)) {
    throw ConfigError(what + " memory_fraction=" + num(o.memory_fraction) +
                      " is not a fraction in (0, 1]. Use e.g. 0.9 (the default).");
  }
}

int64_t batch_size_budget(const BatchSizeFinderOptions& o) {
  if (o.memory_budget_bytes > 0) return o.memory_budget_bytes;
  return static_cast<int64_t>(o.memory_fraction * static_cast<double>(available_system_memory()));
}

BatchSizeSearch::BatchSizeSearch(const BatchSizeFinderOptions& o)
    : binsearch_(o.mode == "binsearch"), max_trials_(o.max_trials), size_(o.init_val) {}

std::optional<int64_t> BatchSizeSearch::next() const {
  if (done_ || size_ < 1) return std::nullopt;
  if (!binsearch_ && trials_ >= max_trials_) return std::nullopt;
  return size_;
}

void BatchSizeSearch::report(bool fits, bool whole_training_set) {
  ++trials_;
  if (fits) largest_ = std::max(largest_, size_);
  if (!binsearch_) {
    if (fits) {
      any_success_ = true;
      if (whole_training_set) {
        done_ = true;
      } else {
        size_ *= 2;
      }
    } else {
      size_ /= 2;
      if (any_success_) done_ = true;
    }
    return;
  }
  if (fits) {
    if (++count_ > max_trials_) {
      done_ = true;
      return;
    }
    low_ = size_;
    if (high_ > 0) {
      if (high_ - low_ <= 1) {
        done_ = true;
      } else {
        size_ = (high_ + low_) / 2;
      }
    } else if (whole_training_set) {
      done_ = true;
    } else {
      size_ *= 2;
    }
  } else {
    high_ = size_;
    size_ = (high_ + low_) / 2;
    if (high_ - low_ <= 1) done_ = true;
  }
}

BatchSizeFinder::BatchSizeFinder(BatchSizeFinderOptions options) : options_(std::move(options)) {
  check_batch_size_finder_options(options_, "BatchSizeFinder");
}

BatchSizeFinder::~BatchSizeFinder() = default;

void BatchSizeFinder::begin_search(Module&, std::optional<int64_t> batch_size) {
  if (!batch_size) {
    throw ConfigError(
        "BatchSizeFinder: the fit has no batch size to change (it was given loaders, or the DataModule's "
        "batch_size() returns nullopt). Fit with a DataModule that overrides batch_size() and set_batch_size(), "
        "as MnistDataModule does, or remove the callback.");
  }
  budget_ = batch_size_budget(options_);
  search_.emplace(options_);
  trial_.reset();
  optimal_.reset();
}

std::optional<SearchTrial> BatchSizeFinder::next_trial() {
  const std::optional<int64_t> size = search_ ? search_->next() : std::nullopt;
  if (!size) return std::nullopt;
  trial_ = std::make_shared<BatchSizeTrial>(budget_);
  return SearchTrial{options_.steps_per_trial, trial_, size};
}

void BatchSizeFinder::end_trial(const SearchTrialOutcome& outcome) {
  search_->report(!outcome.out_of_memory && !trial_->over_budget(), outcome.whole_training_set);
}

void BatchSizeFinder::end_search(Module&) {
  const int64_t largest = search_->largest();
  search_.reset();
  if (largest == 0) {
    throw Error("BatchSizeFinder: no batch size fits (init_val=" + std::to_string(options_.init_val) + ", CPU budget " +
                std::to_string(budget_) +
                " bytes): even the smallest trial ran out of memory. Give a larger memory budget or a smaller model.");
  }
  optimal_ = largest;
}

std::optional<int64_t> BatchSizeFinder::chosen_batch_size() const {
  return optimal_;
}

}  // namespace volt::callbacks
