#include "volt/accelerators/cuda_accelerator.h"

#include "volt/core/error.h"

#ifdef VOLT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace volt::accelerators {

CUDAAccelerator::CUDAAccelerator(int64_t visible_devices, std::string visible_env)
    : visible_devices_(visible_devices), visible_env_(std::move(visible_env)) {}

bool CUDAAccelerator::compiled_with_cuda() {
#ifdef VOLT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int64_t CUDAAccelerator::device_count() {
#ifdef VOLT_WITH_CUDA
  return static_cast<int64_t>(c10::cuda::device_count());
#else
  return 0;
#endif
}

bool CUDAAccelerator::bf16_supported() {
#ifdef VOLT_WITH_CUDA
  const int64_t n = device_count();
  for (int64_t i = 0; i < n; ++i) {
    if (at::cuda::getDeviceProperties(static_cast<int>(i))->major < 8) return false;
  }
  return n > 0;
#else
  return false;
#endif
}

std::vector<int64_t> CUDAAccelerator::parse_devices(const DevicesSpec& spec) const {
  using Kind = DevicesSpec::Kind;
  const std::string visible = visible_env_.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + visible_env_ + ")";
  const std::string have = std::to_string(visible_devices_) + " visible GPU" + (visible_devices_ == 1 ? "" : "s");
  std::vector<int64_t> ids;
  switch (spec.kind) {
    case Kind::kAuto:
    case Kind::kAll:
      for (int64_t i = 0; i < visible_devices_; ++i) ids.push_back(i);
      break;
    case Kind::kCount:
      if (spec.count > visible_devices_) {
        throw ConfigError("devices=" + spec.text + " asks for " + std::to_string(spec.count) + " GPUs but this machine "
                          "has " + have + visible + ". Use devices=" + std::to_string(visible_devices_) +
                          " or fewer, or -1 for all.");
      }
      for (int64_t i = 0; i < spec.count; ++i) ids.push_back(i);
      break;
    case Kind::kIds:
      for (int64_t id : spec.ids) {
        if (id >= visible_devices_) {
          throw ConfigError("devices=" + spec.text + " asks for cuda:" + std::to_string(id) + " but this machine has " +
                            have + visible + ": ids 0 to " + std::to_string(visible_devices_ - 1) + ". Use devices=" +
                            std::to_string(visible_devices_) + " or a list of ids below " +
                            std::to_string(visible_devices_) + ".");
        }
      }
      ids = spec.ids;
      break;
  }
  return ids;
}

std::vector<c10::Device> CUDAAccelerator::get_parallel_devices(const std::vector<int64_t>& ids) const {
  std::vector<c10::Device> out;
  for (int64_t id : ids) out.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(id));
  return out;
}

void CUDAAccelerator::setup_device(const c10::Device& device) {
  if (!device.is_cuda()) throw ConfigError("CUDAAccelerator was given device " + device.str() + "; it drives cuda:N.");
#ifdef VOLT_WITH_CUDA
  c10::cuda::set_device(device.index());
#else
  throw NotSupportedError("this Volt build has no CUDA code (its LibTorch was built without CUDA), so it cannot "
                          "drive " + device.str() + ". Build Volt against a CUDA LibTorch, or use accelerator=\"cpu\".");
#endif
}

std::map<std::string, double> CUDAAccelerator::get_device_stats(const c10::Device& device) const {
#ifdef VOLT_WITH_CUDA
  size_t free_bytes = 0, total_bytes = 0;
  c10::cuda::CUDAGuard guard(device.index());
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return {};
  const double mb = 1024.0 * 1024.0;
  return {{"memory_free_mb", free_bytes / mb},
          {"memory_total_mb", total_bytes / mb},
          {"memory_used_mb", (total_bytes - free_bytes) / mb}};
#else
  (void)device;
  return {};
#endif
}

}  // namespace volt::accelerators
