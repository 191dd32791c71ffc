#pragma once
#include "volt/accelerators/accelerator.h"

namespace volt::accelerators {

/// NVIDIA GPUs through LibTorch's CUDA runtime. Device ids are logical: id i is the i-th
/// GPU CUDA_VISIBLE_DEVICES leaves visible (the variable is read, never rewritten). The
/// hardware code is compiled only when the LibTorch found has CUDA (VOLT_WITH_CUDA);
/// elsewhere the class exists so plans can be made for GPU machines (volt plan --assume).
class CUDAAccelerator : public Accelerator {
 public:
  /// `visible_devices`: how many GPUs this process sees (device_count() on this machine,
  /// or an assumed count); `visible_env`: CUDA_VISIBLE_DEVICES as set, for messages.
  explicit CUDAAccelerator(int64_t visible_devices, std::string visible_env = "");
  std::string name() const override { return "cuda"; }
  bool is_available() const override { return visible_devices_ > 0; }
  /// All visible GPUs.
  int64_t auto_device_count() const override { return visible_devices_; }
  std::vector<int64_t> parse_devices(const DevicesSpec& spec) const override;
  std::vector<c10::Device> get_parallel_devices(const std::vector<int64_t>& ids) const override;
  /// Makes `device` current for this process (c10::cuda::set_device).
  void setup_device(const c10::Device& device) override;
  /// memory_free_mb, memory_total_mb, memory_used_mb of the device.
  std::map<std::string, double> get_device_stats(const c10::Device& device) const override;

  /// GPUs visible to this process; 0 when LibTorch has no CUDA.
  static int64_t device_count();
  /// Whether every visible GPU computes in bfloat16 (compute capability 8.0 or newer).
  static bool bf16_supported();
  /// True when this build has the CUDA code paths.
  static bool compiled_with_cuda();

 private:
  int64_t visible_devices_;
  std::string visible_env_;
};

}  // namespace volt::accelerators
