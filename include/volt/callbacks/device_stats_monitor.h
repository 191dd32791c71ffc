#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "volt/callbacks/callback.h"
#include "volt/core/types.h"

namespace volt::callbacks {

/// Logs what the process and its device use while training, as Lightning's DeviceStatsMonitor
/// does: at on_train_batch_end of every logging step (volt::should_update_logs: every
/// log_every_n_steps steps), through view.log_metrics at state().batches_that_stepped, so every
/// logger receives the row (rank 0's numbers; the view logs on rank 0).
///
/// Keys (prefix "device_stats/" by default; documented in docs/observability.md):
///   CPU (read from /proc/self/stat, /proc/self/statm and /proc/meminfo):
///     cpu_percent     this process's CPU time over wall time since the previous row (the first:
///                     since on_train_start), in percent of one core (above 100 with threads)
///     rss_mb          resident set size, MiB
///     vm_size_mb      virtual memory size, MiB
///     minor_faults    minor page faults since the previous row
///     major_faults    major page faults (ones that read from disk) since the previous row
///     cpu_vm_percent  the machine's memory in use, percent (MemTotal - MemAvailable)
///   CUDA, when the module's device is cuda:N and this build has CUDA (LibTorch's caching
///   allocator's numbers for that device, MiB):
///     cuda_memory_allocated_mb, cuda_memory_reserved_mb,
///     cuda_max_memory_allocated_mb, cuda_max_memory_reserved_mb
///   and, when the NVIDIA driver's NVML library (libnvidia-ml.so.1) loads, that device's
///     gpu_utilization_percent, gpu_memory_utilization_percent   (over the driver's last sample)
///
/// `cpu_stats`: nullopt (default) logs CPU keys when the device is not CUDA, as Lightning's
/// cpu_stats=None; true always; false never.
class DeviceStatsMonitor : public Callback {
 public:
  struct Options {
    std::optional<bool> cpu_stats;
    std::string prefix = "device_stats/";
  };
  DeviceStatsMonitor();
  explicit DeviceStatsMonitor(Options options);

  /// "DeviceStatsMonitor".
  std::string state_key() const override { return "DeviceStatsMonitor"; }
  /// Throws volt::ConfigError when fitting without loggers (nothing would record the rows).
  void setup(TrainerView& view, Stage stage) override;
  /// Takes the first reading the first row's rates are measured from.
  void on_train_start(TrainerView& view) override;
  /// Logs a row on logging steps (once per step: accumulating micro-batches do not repeat it).
  void on_train_batch_end(TrainerView& view, const at::Tensor& loss, const Batch& batch, int64_t batch_idx) override;

  /// The process's counters now, from /proc/self (Linux). Throws volt::Error when they cannot
  /// be read.
  struct ProcessReading {
    std::chrono::steady_clock::time_point wall;
    double cpu_seconds = 0;  ///< user + system time
    int64_t minor_faults = 0;
    int64_t major_faults = 0;
    double rss_mb = 0;
    double vm_size_mb = 0;
  };
  static ProcessReading read_process();
  /// The caching allocator's numbers for cuda:`device_index` (keys as above, without prefix);
  /// empty in a build without CUDA.
  static std::map<std::string, double> cuda_memory_stats(int device_index);
  /// NVML's utilisation of cuda:`device_index` (keys as above, without prefix), mapped through
  /// CUDA_VISIBLE_DEVICES; empty when NVML does not load (no NVIDIA driver) or fails. The
  /// library is libnvidia-ml.so.1, or VOLT_NVML_LIBRARY when set.
  static std::map<std::string, double> gpu_utilization(int device_index);
  /// The metrics the next row would hold (and the reading it measures from advanced).
  MetricMap collect(const TrainerView& view);

 private:
  Options options_;
  std::optional<ProcessReading> last_;
  int64_t last_logged_step_ = -1;
  bool warned_ = false;
};

}  // namespace volt::callbacks
