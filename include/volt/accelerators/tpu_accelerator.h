#pragma once
#include <memory>

#include "volt/accelerators/accelerator.h"
#include "volt/accelerators/tpu_runtime.h"
#include "volt/core/environ.h"
#include "volt/core/tpu_topology.h"

namespace volt::accelerators {

/// TPUs, found without any TPU library: the host's variables (TPU_ACCELERATOR_TYPE,
/// TPU_NAME, TPU_WORKER_ID, COLAB_TPU_ADDR, PJRT_DEVICE=TPU, ...), /dev/accel* and
/// /dev/vfio devices, and libtpu.so on the library path. Devices per host follow the
/// accelerator type (see TpuTopology) unless VOLT_TPU_DEVICES_PER_HOST says otherwise.
/// Training needs a device runtime (TpuRuntime): a library loaded at run time, or the
/// CPU emulation; without one the accelerator still describes the host for `volt plan`.
class TPUAccelerator : public Accelerator {
 public:
  explicit TPUAccelerator(TpuHost host, std::shared_ptr<TpuRuntime> runtime = nullptr);
  std::string name() const override { return "tpu"; }
  bool is_available() const override { return host_.present; }
  /// Every device of this host.
  int64_t auto_device_count() const override { return host_.topology.devices_per_host; }
  /// 1 or all devices of the host (a count), or a list of one device id.
  std::vector<int64_t> parse_devices(const DevicesSpec& spec) const override;
  /// The runtime's devices (lazy:0, ... under the emulation); xla:0, xla:1, ... without one.
  std::vector<c10::Device> get_parallel_devices(const std::vector<int64_t>& ids) const override;
  /// Checks the device against the runtime. Without a runtime: NotSupportedError saying
  /// which settings were looked for.
  void setup_device(const c10::Device& device) override;
  /// The device runtime, or nullptr (plan only).
  const std::shared_ptr<TpuRuntime>& runtime() const { return runtime_; }
  std::map<std::string, double> get_device_stats(const c10::Device& device) const override;
  const TpuHost& host() const { return host_; }

  /// Looks for TPU device files and libtpu under `root` ("/" normally; tests pass a
  /// fake tree). Returns a description of what was found, empty when nothing was.
  static std::string probe_files(const Environ& env, const std::string& root = "/");
  /// describe_tpu_host from the variables plus probe_files. Under VOLT_TPU_EMULATION=lazy,
  /// an "emulated" host of type VOLT_TPU_EMULATION_HOST; with VOLT_TPU_RUNTIME_LIBRARY set,
  /// a host even where nothing else says so (the library is the evidence).
  static TpuHost probe(const Environ& env, const std::string& root = "/");

 private:
  TpuHost host_;
  std::shared_ptr<TpuRuntime> runtime_;
};

}  // namespace volt::accelerators
