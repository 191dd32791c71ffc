#include "strategies/detail/xla_device.h"

#include <optional>

#include <torch/optim/optimizer.h>

#include "volt/accelerators/tpu_accelerator.h"
#include "volt/core/device_placement.h"
#include "volt/core/error.h"
#include "volt/precision/true_precision.h"

namespace volt::strategies::detail {

std::shared_ptr<accelerators::TpuRuntime> xla_runtime(const std::string& strategy,
                                                      const std::shared_ptr<accelerators::Accelerator>& accelerator,
                                                      const c10::Device& device) {
  const auto tpu = std::dynamic_pointer_cast<accelerators::TPUAccelerator>(accelerator);
  auto runtime = tpu ? tpu->runtime() : nullptr;
  if (!runtime) {
    throw NotSupportedError("strategy='" + strategy + "' needs a TPU accelerator with a device runtime "
                            "(VOLT_TPU_RUNTIME_LIBRARY, or VOLT_TPU_EMULATION=lazy on the CPU); none was given.");
  }
  if (device.type() != runtime->device_type()) {
    throw ConfigError("strategy='" + strategy + "' was given device " + device.str() + ", but the TPU runtime (" +
                      runtime->describe() + ") computes on " + c10::DeviceTypeName(runtime->device_type(), true) +
                      " devices.");
  }
  return runtime;
}

void setup_module_on_xla(Module& module, const c10::Device& device, precision::Precision& precision) {
  module.set_device(device);
  module.configure_model();
  // Module::to(dtype) on lazy tensors changes their metadata but not their data, so the
  // true-precision dtype is applied while re-creating the tensors on the device. Other
  // plug-ins convert first (on the tensors still on the CPU).
  std::optional<c10::ScalarType> dtype;
  if (const auto* true_precision = dynamic_cast<const precision::TruePrecision*>(&precision)) {
    dtype = true_precision->dtype();
  } else {
    precision.convert_module(module);
  }
  place_on_device(module, device, dtype);
}

Checkpoint checkpoint_on_host(const Checkpoint& checkpoint) {
  Checkpoint host = checkpoint;
  for (auto& [name, tensor] : host.tensors) {
    if (tensor.defined() && !tensor.device().is_cpu()) tensor = tensor.to(c10::kCPU);
  }
  return host;
}

std::string optimizer_state_via_host(torch::optim::Optimizer& optimizer, const c10::Device& device,
                                     const std::function<std::string()>& save) {
  move_optimizer_state(optimizer, c10::Device(c10::kCPU));
  std::string bytes;
  try {
    bytes = save();
  } catch (...) {
    move_optimizer_state(optimizer, device);
    throw;
  }
  move_optimizer_state(optimizer, device);
  return bytes;
}

}  // namespace volt::strategies::detail
