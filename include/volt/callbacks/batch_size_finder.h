#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "volt/callbacks/callback.h"

namespace volt::callbacks {

/// Bytes of CPU tensor memory, as Volt's counting CPU allocator sees them. The allocator wraps
/// LibTorch's default CPU allocator from the first call of track_cpu_memory() on, for the rest of the
/// process; memory allocated before that is not counted.
struct CpuMemoryStats {
  int64_t live = 0;  ///< allocated now (since tracking began)
  int64_t peak = 0;  ///< the most live at once since the last reset_cpu_memory_peak()
};

/// Starts counting (idempotent; thread-safe). Every CPU tensor allocated afterwards is counted.
void track_cpu_memory();
/// The counts now (zeros before track_cpu_memory()).
CpuMemoryStats cpu_memory();
/// Sets peak to live.
void reset_cpu_memory_peak();
/// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read).
int64_t available_system_memory();

/// One trial of the batch-size finder (Lightning's BatchSizeFinder runs scale_batch_size; in Volt,
/// volt::Tuner::scale_batch_size runs one short fit per batch size with this callback in it). It
/// watches the CPU memory the fit allocates (cpu_memory().peak above what was live at on_fit_start)
/// and, with a budget, stops the fit as soon as a training step went over it: the trial then counts as
/// out of memory. At the end of the fit the optimizer is put back as it was at on_fit_start.
/// Distributed: a trial is over budget when it is on any rank.
class BatchSizeFinder : public Callback {
 public:
  /// `budget_bytes`: the most CPU memory a trial may add; 0: no budget (only real out-of-memory
  /// errors count). Negative: ConfigError.
  explicit BatchSizeFinder(int64_t budget_bytes = 0);
  ~BatchSizeFinder() override;

  /// "BatchSizeFinder".
  std::string state_key() const override { return "BatchSizeFinder"; }
  void on_fit_start(TrainerView& view) override;
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch, int64_t batch_idx) override;
  void on_fit_end(TrainerView& view) override;
  void on_exception(TrainerView& view, const std::exception& error) override;

  int64_t budget_bytes() const { return budget_; }
  /// The most CPU memory the last trial added at once.
  int64_t peak_bytes() const { return peak_; }
  /// True when the last trial went over the budget (on any rank).
  bool over_budget() const { return over_; }

 private:
  void measure();
  void restore();

  int64_t budget_;
  int64_t base_ = 0;
  int64_t peak_ = 0;
  bool over_ = false;
  struct Snapshot;
  std::unique_ptr<Snapshot> snapshot_;
};

}  // namespace volt::callbacks
