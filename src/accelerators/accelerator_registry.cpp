#include "volt/accelerators/accelerator_registry.h"

#include <mutex>

#include "volt/accelerators/cpu_accelerator.h"
#include "volt/accelerators/cuda_accelerator.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/accelerators/tpu_runtime.h"

namespace volt::accelerators {

void register_builtin_accelerators(AcceleratorRegistry& r) {
  r.add("cpu", "the CPU; devices counts processes, num_threads sets intra-op threads", {"cpu", 10, nullptr},
        [](const AcceleratorContext& c) -> std::shared_ptr<Accelerator> {
          return std::make_shared<CPUAccelerator>(c.num_threads);
        });
  r.add("cuda",
        std::string("NVIDIA GPUs (accelerator=\"gpu\" too)") +
            (CUDAAccelerator::compiled_with_cuda() ? "" : "; this build has no CUDA"),
        {"cuda", 20, [](const HardwareProbe& hw) { return hw.cuda_devices > 0; }},
        [](const AcceleratorContext& c) -> std::shared_ptr<Accelerator> {
          return std::make_shared<CUDAAccelerator>(c.hardware.cuda_devices, c.hardware.cuda_visible_devices);
        });
  r.add("tpu",
        "TPU hosts (Colab, Kaggle, Cloud TPU VMs) through a runtime library (VOLT_TPU_RUNTIME_LIBRARY), or "
        "emulated on the CPU (VOLT_TPU_EMULATION=lazy)",
        {"tpu", 30, [](const HardwareProbe& hw) { return hw.tpu.present; }},
        [](const AcceleratorContext& c) -> std::shared_ptr<Accelerator> {
          // The runtime is opened here, once, so that a bad library fails when the Trainer is
          // built and the plan names what really runs; without one the accelerator still
          // describes the host (volt plan) and training says what is missing.
          const auto spec = TpuRuntimeSpec::parse(c.hardware.tpu_runtime);
          std::shared_ptr<TpuRuntime> runtime;
          if (spec.kind != TpuRuntimeSpec::Kind::kNone) runtime = TpuRuntime::open(spec);
          return std::make_shared<TPUAccelerator>(c.hardware.tpu, std::move(runtime));
        });
}

AcceleratorRegistry& accelerator_registry() {
  static AcceleratorRegistry registry("accelerator", {"auto", "gpu"});
  static std::once_flag built_in;
  std::call_once(built_in, [] { register_builtin_accelerators(registry); });
  return registry;
}

void register_accelerator(const std::string& key, std::string description, AcceleratorInfo info,
                          AcceleratorRegistry::Factory factory) {
  if (info.device_type != "cpu" && info.device_type != "cuda" && info.device_type != "tpu") {
    throw ConfigError("register_accelerator(\"" + key + "\"): device_type='" + info.device_type +
                      "' is not a device family Volt's strategies know. Use \"cpu\", \"cuda\" or \"tpu\".");
  }
  accelerator_registry().add(key, std::move(description), std::move(info), std::move(factory));
}

}  // namespace volt::accelerators
