#include "volt/accelerators/hardware_probe.h"

#include <algorithm>
#include <thread>

#include "volt/accelerators/cuda_accelerator.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/core/error.h"
#include "volt/core/numbers.h"

namespace volt::accelerators {

HardwareProbe HardwareProbe::detect(const Environ& env) {
  HardwareProbe p;
  p.cpu_cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  p.cuda_devices = CUDAAccelerator::device_count();
  p.cuda_bf16 = p.cuda_devices > 0 && CUDAAccelerator::bf16_supported();
  p.cuda_visible_devices = env.get_or("CUDA_VISIBLE_DEVICES", "");
  p.tpu = TPUAccelerator::probe(env);
  p.tpu_runtime = TpuRuntimeSpec::from_environ(env).to_string();
  return p;
}

HardwareProbe HardwareProbe::assume(const std::string& spec, const Environ& env) {
  HardwareProbe p;
  p.cpu_cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  p.source = "assumed: " + spec;
  const auto eq = spec.find('=');
  const std::string kind = spec.substr(0, eq);
  const std::string value = eq == std::string::npos ? "" : spec.substr(eq + 1);
  const bool number = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
  const std::string forms = "Use cpu, cuda=N (N GPUs), tpu=N (N TPU devices per host) or tpu=TYPE (e.g. tpu=v4-8).";
  // A count from the user: digits that may not fit 64 bits, and more devices than a host has.
  const auto count = [&](int64_t max) {
    const auto n = numbers::parse_int(value, 1, max);
    if (!n) throw ConfigError("--assume " + spec + ": the device count " + value + " " + n.problem + ". " + forms);
    return *n.value;
  };
  if (kind == "cpu" && value.empty()) return p;
  if ((kind == "cuda" || kind == "gpu") && number && value.find_first_not_of('0') != std::string::npos) {
    p.cuda_devices = count(1024);
    p.cuda_bf16 = true;
    return p;
  }
  if (kind == "tpu" && !value.empty()) {
    Environ tpu_env = env;
    if (number) {
      if (value.find_first_not_of('0') == std::string::npos) {
        throw ConfigError("--assume " + spec + ": a TPU host has at least one device.");
      }
      count(1024);
      tpu_env.set("VOLT_TPU_DEVICES_PER_HOST", value);
      if (!tpu_env.has("TPU_ACCELERATOR_TYPE")) tpu_env.set("PJRT_DEVICE", "TPU");
    } else {
      parse_tpu_accelerator_type(value);  // a clear error for a bad type
      tpu_env.set("TPU_ACCELERATOR_TYPE", value);
    }
    p.tpu = describe_tpu_host(tpu_env, false);
    p.tpu_runtime = TpuRuntimeSpec::from_environ(env).to_string();
    return p;
  }
  throw ConfigError("--assume '" + spec + "' is not understood. " + forms);
}

}  // namespace volt::accelerators
