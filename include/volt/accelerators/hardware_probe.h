#pragma once
#include <cstdint>
#include <string>

#include "volt/core/environ.h"
#include "volt/core/tpu_topology.h"

namespace volt::accelerators {

/// What hardware a plan may use: looked up on this machine, or assumed (volt plan
/// --assume cuda=8) to see what a job would do on other nodes.
struct HardwareProbe {
  int64_t cpu_cores = 1;
  int64_t cuda_devices = 0;
  /// Every visible GPU computes in bfloat16.
  bool cuda_bf16 = false;
  /// CUDA_VISIBLE_DEVICES as set (for messages).
  std::string cuda_visible_devices;
  TpuHost tpu;
  /// The TPU device runtime asked for (TpuRuntimeSpec::to_string: "none", "library:/p",
  /// "emulation:lazy:v3-8"), from VOLT_TPU_RUNTIME_LIBRARY / VOLT_TPU_EMULATION.
  std::string tpu_runtime = "none";
  /// "detected on this machine" or "assumed: cuda=8".
  std::string source = "detected on this machine";

  /// Probes this machine (CUDA through LibTorch, TPU through variables and files).
  static HardwareProbe detect(const Environ& env);
  /// Replaces the probe: "cpu", "cuda=N", "gpu=N", "tpu=N" (N devices per host) or
  /// "tpu=TYPE" (an accelerator type such as v4-8). Throws ConfigError otherwise.
  static HardwareProbe assume(const std::string& spec, const Environ& env);
};

}  // namespace volt::accelerators
