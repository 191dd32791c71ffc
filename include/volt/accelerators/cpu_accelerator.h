#pragma once
#include "volt/accelerators/accelerator.h"

namespace volt::accelerators {

/// The CPU. setup_device sets LibTorch's intra-op thread count (which otherwise
/// defaults to half the cores) and tunes glibc's allocator (see tune_allocator);
/// stats come from /proc.
class CPUAccelerator : public Accelerator {
 public:
  /// num_threads 0: all cores of this machine.
  explicit CPUAccelerator(int64_t num_threads = 0);
  std::string name() const override { return "cpu"; }
  bool is_available() const override { return true; }
  /// One process: on CPU, `devices` counts processes.
  int64_t auto_device_count() const override { return 1; }
  /// A count n gives n processes; -1, lists of ids are errors (CPU takes a process count).
  std::vector<int64_t> parse_devices(const DevicesSpec& spec) const override;
  std::vector<c10::Device> get_parallel_devices(const std::vector<int64_t>& ids) const override;
  void setup_device(const c10::Device& device) override;
  void teardown() override;
  /// cpu_percent (this process, since the last call), rss_mb, vm_total_mb, vm_available_mb.
  std::map<std::string, double> get_device_stats(const c10::Device& device) const override;
  int64_t num_threads() const { return num_threads_; }
  /// Changes the count setup_device will set (0: all cores). The accelerator connector
  /// calls it once it knows how many processes share the node's cores.
  void set_num_threads(int64_t num_threads);
  /// Raises glibc malloc's mmap and trim thresholds once per process (32 MiB, 1 GiB) so
  /// that per-step activation buffers are reused instead of mapped and unmapped. Skipped
  /// when GLIBC_TUNABLES already sets malloc options or VOLT_TUNE_MALLOC=0.
  static void tune_allocator();

 private:
  int64_t num_threads_;
  int previous_threads_ = -1;
};

}  // namespace volt::accelerators
