#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "volt/accelerators/devices.h"

namespace volt::accelerators {

/// Hardware only: find devices, check them, prepare and release them, report their
/// state. Nothing here knows how training runs (that is a strategy's job).
class Accelerator {
 public:
  virtual ~Accelerator() = default;
  /// Registry key: "cpu", "cuda", "tpu".
  virtual std::string name() const = 0;
  /// Whether this machine has the hardware and this build can drive it.
  virtual bool is_available() const = 0;
  /// Devices (or, for CPU, processes) to use when devices="auto".
  virtual int64_t auto_device_count() const = 0;
  /// Resolves the devices flag into logical ids (CPU: 0..n-1, one per process). Throws
  /// ConfigError when the request does not fit this machine, naming what exists.
  virtual std::vector<int64_t> parse_devices(const DevicesSpec& spec) const = 0;
  /// The devices behind a resolved list of ids (for CPU: n times cpu).
  virtual std::vector<c10::Device> get_parallel_devices(const std::vector<int64_t>& ids) const = 0;
  /// Prepares `device` for this process (threads for CPU, the current device for CUDA).
  virtual void setup_device(const c10::Device& device) = 0;
  /// Releases what setup_device took.
  virtual void teardown() {}
  /// Numbers describing the device now (memory, utilisation), for loggers.
  virtual std::map<std::string, double> get_device_stats(const c10::Device& device) const = 0;
};

}  // namespace volt::accelerators
