#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "volt/accelerators/accelerator.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/core/registry.h"

namespace volt::accelerators {

/// What an accelerator factory builds from: the hardware the plan may use.
struct AcceleratorContext {
  const HardwareProbe& hardware;
  /// Intra-op threads per process asked for (0: all cores). The accelerator connector
  /// adjusts a CPUAccelerator's count once it knows how many processes share the node.
  int64_t num_threads = 0;
};

/// What the accelerator connector needs to know of an accelerator name before it builds one.
struct AcceleratorInfo {
  /// The device family the accelerator drives: "cpu", "cuda" or "tpu". Strategies
  /// (StrategySpec::accelerators) and precision plug-ins are checked against it, so a
  /// custom accelerator of a known family trains with the strategies of that family.
  std::string device_type = "cpu";
  /// accelerator="auto" takes the available entry with the highest priority; a negative
  /// priority is never chosen by "auto".
  int auto_priority = -1;
  /// Whether this machine (or the assumed hardware of `volt plan --assume`) has the
  /// hardware; null: always.
  std::function<bool(const HardwareProbe&)> available;
};

/// The Trainer's `accelerator` option ("gpu" is "cuda", as in Lightning; "auto" is reserved).
using AcceleratorRegistry = InfoRegistry<AcceleratorInfo, Accelerator, const AcceleratorContext&>;

/// The registry, with the built-ins on first use: "cpu", "cuda", "tpu" (whose factory
/// opens the TPU device runtime, once per accelerator connector).
AcceleratorRegistry& accelerator_registry();
/// Adds Volt's accelerators to `registry` (what accelerator_registry() calls once).
void register_builtin_accelerators(AcceleratorRegistry& registry);

/// Adds (or replaces) an accelerator name for the `accelerator` option:
///
///     volt::accelerators::register_accelerator("my_cpu", "the CPU, counted", {.device_type = "cpu"},
///         [](const volt::accelerators::AcceleratorContext& c) {
///           return std::make_shared<MyCpuAccelerator>(c.num_threads); });
void register_accelerator(const std::string& key, std::string description, AcceleratorInfo info,
                          AcceleratorRegistry::Factory factory);

}  // namespace volt::accelerators
