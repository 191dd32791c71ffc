#include "strategies/detail/xla_device.h"

#include <optional>

#include <torch/optim/optimizer.h>

#include "volt/core/device_placement.h"
#include "volt/precision/true_precision.h"

namespace volt::strategies::detail {

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
