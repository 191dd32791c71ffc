// What the two TPU strategies (single_xla and xla) do alike on a lazy-tensor device:
// building the module there, and taking state to the CPU for checkpoints.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "volt/core/checkpoint.h"
#include "volt/core/module.h"
#include "volt/precision/precision.h"

namespace torch::optim {
class Optimizer;
}

namespace volt::accelerators {
class Accelerator;
class TpuRuntime;
}  // namespace volt::accelerators

namespace volt::strategies::detail {

/// The TPU runtime behind `accelerator` for strategy `strategy` on `device`; throws
/// NotSupportedError when there is none, ConfigError when `device` is not of its type.
std::shared_ptr<accelerators::TpuRuntime> xla_runtime(const std::string& strategy,
                                                      const std::shared_ptr<accelerators::Accelerator>& accelerator,
                                                      const c10::Device& device);

/// configure_model under `device`, the precision's dtype, then every tensor of the module
/// re-created on the device (torch::nn::Module::to cannot move tensors to a lazy device).
void setup_module_on_xla(Module& module, const c10::Device& device, precision::Precision& precision);

/// `checkpoint` with every tensor that is not on the CPU copied there (call after the step
/// boundary, so that the copies read computed values).
Checkpoint checkpoint_on_host(const Checkpoint& checkpoint);

/// The optimizer's state moved to the CPU, serialised by `save`, and moved back to `device`
/// (also when `save` throws).
std::string optimizer_state_via_host(torch::optim::Optimizer& optimizer, const c10::Device& device,
                                     const std::function<std::string()>& save);

}  // namespace volt::strategies::detail
