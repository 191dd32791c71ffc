#pragma once
/// Every difference between the LibTorch versions Volt supports (1.13 from Debian 12,
/// 2.x from Debian 13 and PyTorch wheels) lives here and nowhere else.
#include <torch/version.h>

#define VOLT_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||               \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace volt::compat {

/// "1.13.0", "2.6.0", ...
inline const char* torch_version() {
  return TORCH_VERSION;
}

/// Whether float16 matrix products run on CPU (LibTorch 1.13: "addmm_impl_cpu_" not
/// implemented for 'Half'; 2.x has them).
constexpr bool kCpuHalfMatmul = VOLT_TORCH_VERSION_AT_LEAST(2, 1);

// Autocast state per device type (LibTorch 2.4 replaced set_cpu_enabled,
// set_autocast_cpu_dtype, ... with functions taking a DeviceType). Defined in
// src/core/compat.cpp so that this header stays light.
bool autocast_enabled(c10::DeviceType device);
void set_autocast_enabled(c10::DeviceType device, bool enabled);
c10::ScalarType autocast_dtype(c10::DeviceType device);
void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype);

}  // namespace volt::compat
