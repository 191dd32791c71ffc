#include "volt/accelerators/tpu_accelerator.h"

#include <filesystem>
#include <sstream>

#include "volt/core/error.h"

namespace fs = std::filesystem;

namespace volt::accelerators {

TPUAccelerator::TPUAccelerator(TpuHost host, std::shared_ptr<TpuRuntime> runtime)
    : host_(std::move(host)), runtime_(std::move(runtime)) {}

std::vector<int64_t> TPUAccelerator::parse_devices(const DevicesSpec& spec) const {
  using Kind = DevicesSpec::Kind;
  const int64_t per_host = host_.topology.devices_per_host;
  const std::string type = host_.topology.accelerator_type;
  std::vector<int64_t> ids;
  switch (spec.kind) {
    case Kind::kAuto:
    case Kind::kAll:
      for (int64_t i = 0; i < per_host; ++i) ids.push_back(i);
      break;
    case Kind::kCount:
      if (spec.count != 1 && spec.count != per_host) {
        throw ConfigError("devices=" + spec.text + " on TPU: a process drives one TPU device or the host runs one "
                          "process per device, so use devices=1 or devices=" + std::to_string(per_host) +
                          " (this " + type + " host has " + std::to_string(per_host) + ").");
      }
      for (int64_t i = 0; i < spec.count; ++i) ids.push_back(i);
      break;
    case Kind::kIds:
      if (spec.ids.size() != 1) {
        throw ConfigError("devices=" + spec.text + " lists several TPU devices; a list may name one device (e.g. "
                          "\"1,\"). Use devices=" + std::to_string(per_host) + " for all of them.");
      }
      if (spec.ids.front() >= per_host) {
        throw ConfigError("devices=" + spec.text + " asks for TPU device " + std::to_string(spec.ids.front()) +
                          " but this " + type + " host has devices 0 to " + std::to_string(per_host - 1) + ".");
      }
      ids = spec.ids;
      break;
  }
  return ids;
}

std::vector<c10::Device> TPUAccelerator::get_parallel_devices(const std::vector<int64_t>& ids) const {
  std::vector<c10::Device> out;
  const c10::DeviceType type = runtime_ ? runtime_->device_type() : c10::kXLA;
  for (int64_t id : ids) out.emplace_back(type, static_cast<c10::DeviceIndex>(id));
  return out;
}

void TPUAccelerator::setup_device(const c10::Device& device) {
  if (!runtime_) {
    throw NotSupportedError("training on " + device.str() + " needs a TPU device runtime (a lazy-tensor backend), and "
                            "none was asked for (" + TpuRuntimeSpec::looked_for(Environ::current()) + "). On a TPU "
                            "host set VOLT_TPU_RUNTIME_LIBRARY to the runtime library; elsewhere set "
                            "VOLT_TPU_EMULATION=lazy to emulate one on the CPU (docs/tpu.md).");
  }
  if (device.type() != runtime_->device_type() || device.index() >= runtime_->device_count()) {
    throw ConfigError(device.str() + " is not a device of the TPU runtime " + runtime_->describe() + ".");
  }
}

std::map<std::string, double> TPUAccelerator::get_device_stats(const c10::Device&) const {
  return {{"devices_per_host", static_cast<double>(host_.topology.devices_per_host)}};
}

std::string TPUAccelerator::probe_files(const Environ& env, const std::string& root) {
  std::vector<std::string> found;
  std::error_code ec;
  const fs::path dev = fs::path(root) / "dev";
  int accel = 0;
  for (const auto& entry : fs::directory_iterator(dev, ec)) {
    if (entry.path().filename().string().rfind("accel", 0) == 0) ++accel;
  }
  if (accel > 0) found.push_back(std::to_string(accel) + " /dev/accel* device(s)");
  int vfio = 0;
  for (const auto& entry : fs::directory_iterator(dev / "vfio", ec)) {
    const std::string n = entry.path().filename().string();
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) ++vfio;
  }
  if (vfio > 0) found.push_back(std::to_string(vfio) + " /dev/vfio group(s)");
  std::vector<std::string> dirs;
  if (auto p = env.get("TPU_LIBRARY_PATH"); p && fs::exists(fs::path(root) / fs::path(*p).relative_path(), ec)) {
    found.push_back("libtpu at TPU_LIBRARY_PATH=" + *p);
  }
  std::stringstream ld(env.get_or("LD_LIBRARY_PATH", ""));
  std::string dir;
  while (std::getline(ld, dir, ':')) {
    if (!dir.empty() && fs::exists(fs::path(root) / fs::path(dir).relative_path() / "libtpu.so", ec)) {
      found.push_back("libtpu.so in " + dir);
      break;
    }
  }
  std::string out;
  for (const auto& f : found) out += (out.empty() ? "" : ", ") + f;
  return out;
}

TpuHost TPUAccelerator::probe(const Environ& env, const std::string& root) {
  const TpuRuntimeSpec runtime = TpuRuntimeSpec::from_environ(env);
  if (runtime.kind == TpuRuntimeSpec::Kind::kEmulation) {
    TpuHost host;
    host.present = true;
    host.platform = "emulated";
    host.topology = parse_tpu_accelerator_type(runtime.host_type);
    host.worker_hostnames = {"127.0.0.1"};
    host.evidence = "VOLT_TPU_EMULATION=lazy (a " + runtime.host_type + " host emulated on the CPU)";
    return host;
  }
  const std::string files = probe_files(env, root);
  TpuHost host = describe_tpu_host(env, !files.empty(), files);
  if (!host.present && runtime.kind == TpuRuntimeSpec::Kind::kLibrary) {
    Environ with_library = env;
    with_library.set("PJRT_DEVICE", "TPU");
    host = describe_tpu_host(with_library, false);
    host.evidence = "VOLT_TPU_RUNTIME_LIBRARY=" + runtime.library;
  }
  return host;
}

}  // namespace volt::accelerators
