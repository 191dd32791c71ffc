#pragma once
/// Every difference between the LibTorch versions Volt supports (1.13 from Debian 12,
/// 2.x from Debian 13 and PyTorch wheels) lives here and nowhere else.
#include <torch/version.h>

#define VOLT_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||               \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace volt::compat {

/// "1.13.0", "2.6.0", ...
inline const char* torch_version() {
  return TORCH_VERSION;
}

}  // namespace volt::compat
