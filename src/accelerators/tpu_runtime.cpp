#include "volt/accelerators/tpu_runtime.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include <torch/csrc/lazy/backend/backend_interface.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/core/metrics.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>

#include "volt/core/error.h"
#include "volt/core/tpu_topology.h"

namespace volt::accelerators {
namespace {

const char* kLibraryVar = "VOLT_TPU_RUNTIME_LIBRARY";
const char* kEmulationVar = "VOLT_TPU_EMULATION";
const char* kEmulationHostVar = "VOLT_TPU_EMULATION_HOST";

void write_error(char* error, size_t size, const std::string& message) {
  if (error == nullptr || size == 0) return;
  std::strncpy(error, message.c_str(), size - 1);
  error[size - 1] = '\0';
}

int emulation_mark_step(int device_index, char* error, size_t error_size) {
  try {
    const torch::lazy::BackendDevice device =
        torch::lazy::atenDeviceToBackendDevice(c10::Device(c10::kLazy, static_cast<c10::DeviceIndex>(device_index)));
    // wait=true: the step is done when this returns, as xm.mark_step() + wait would be.
    torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&device, {}, /*wait=*/true);
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

int64_t counter(const char* name) {
  torch::lazy::CounterData* c = torch::lazy::GetCounter(name);
  return c == nullptr ? 0 : c->Value();
}

}  // namespace

int volt_tpu_emulation_init(VoltTpuRuntime* runtime, int device_count, char* error, size_t error_size) {
  try {
    static std::once_flag once;
    // One lazy backend per process: a runtime library may have registered it already.
    std::call_once(once, [] {
      if (!torch::lazy::hasBackend()) torch::lazy::InitTorchScriptBackend();
    });
    runtime->abi_version = VOLT_TPU_RUNTIME_ABI_VERSION;
    runtime->name = "torchscript-lazy (emulation on the CPU)";
    runtime->device_type = "lazy";
    runtime->device_count = device_count;
    runtime->mark_step = &emulation_mark_step;
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

std::string TpuRuntimeSpec::to_string() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kLibrary:
      return "library:" + library;
    case Kind::kEmulation:
      return "emulation:lazy:" + host_type;
  }
  return "none";
}

TpuRuntimeSpec TpuRuntimeSpec::parse(const std::string& text) {
  TpuRuntimeSpec spec;
  if (text.empty() || text == "none") return spec;
  if (text.rfind("library:", 0) == 0 && text.size() > 8) {
    spec.kind = Kind::kLibrary;
    spec.library = text.substr(8);
    return spec;
  }
  const std::string emulation = "emulation:lazy:";
  if (text.rfind(emulation, 0) == 0) {
    spec.kind = Kind::kEmulation;
    spec.host_type = text.substr(emulation.size());
    parse_tpu_accelerator_type(spec.host_type);
    return spec;
  }
  throw ConfigError("TPU runtime '" + text +
                    "' is not understood. Known forms: none, library:/path/lib.so, "
                    "emulation:lazy:v3-8.");
}

TpuRuntimeSpec TpuRuntimeSpec::from_environ(const Environ& env) {
  TpuRuntimeSpec spec;
  if (auto lib = env.get(kLibraryVar)) {
    if (lib->empty()) {
      throw ConfigError(std::string(kLibraryVar) +
                        " is set but empty. Set it to the path of a TPU runtime library "
                        "(see docs/tpu.md), or unset it.");
    }
    spec.kind = Kind::kLibrary;
    spec.library = *lib;
    return spec;
  }
  if (auto emu = env.get(kEmulationVar)) {
    if (*emu != "lazy") {
      throw ConfigError(std::string(kEmulationVar) + "=" + *emu +
                        " is not known. The one emulation is \"lazy\" "
                        "(LibTorch's TorchScript lazy backend on the CPU); unset the variable to emulate nothing.");
    }
    spec.kind = Kind::kEmulation;
    spec.host_type = env.get_or(kEmulationHostVar, "v3-8");
    parse_tpu_accelerator_type(spec.host_type);  // a clear error for a bad type
  }
  return spec;
}

std::string TpuRuntimeSpec::looked_for(const Environ& env) {
  auto show = [&](const char* key) {
    auto v = env.get(key);
    return std::string(key) + (v ? "=" + *v : " (unset)");
  };
  return show(kLibraryVar) + ", " + show(kEmulationVar);
}

TpuRuntime::TpuRuntime(TpuRuntimeSpec spec, const VoltTpuRuntime& table)
    : spec_(std::move(spec)),
      name_(table.name != nullptr ? table.name : "unnamed"),
      device_type_(c10::kXLA),
      device_count_(table.device_count),
      mark_step_(table.mark_step),
      all_reduce_mean_(table.abi_version >= 2 ? table.all_reduce_mean : nullptr) {
  const std::string where = spec_.kind == TpuRuntimeSpec::Kind::kLibrary ? "TPU runtime library '" + spec_.library + "'"
                                                                         : "the TPU emulation";
  const std::string type = table.device_type != nullptr ? table.device_type : "";
  if (type == "lazy") {
    device_type_ = c10::kLazy;
  } else if (type != "xla") {
    throw ConfigError(where + " reports device type '" + type +
                      "'; Volt knows \"xla\" and \"lazy\". Fix the library's "
                      "volt_tpu_runtime_init.");
  }
  if (device_count_ < 1) {
    throw ConfigError(where + " reports " + std::to_string(device_count_) +
                      " devices; a TPU runtime has at least one.");
  }
  if (mark_step_ == nullptr) {
    throw ConfigError(where + " gives no mark_step function; fill VoltTpuRuntime::mark_step in volt_tpu_runtime_init.");
  }
}

std::shared_ptr<TpuRuntime> TpuRuntime::open(const TpuRuntimeSpec& spec) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<TpuRuntime>> opened;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = spec.to_string();
  if (auto it = opened.find(key); it != opened.end()) return it->second;

  VoltTpuRuntime table{};
  table.abi_version = VOLT_TPU_RUNTIME_ABI_VERSION;
  char error[1024] = {0};
  switch (spec.kind) {
    case TpuRuntimeSpec::Kind::kNone:
      throw NotSupportedError(
          "no TPU runtime was asked for: set VOLT_TPU_RUNTIME_LIBRARY to a runtime library, or "
          "VOLT_TPU_EMULATION=lazy to emulate a TPU host on the CPU (docs/tpu.md).");
    case TpuRuntimeSpec::Kind::kEmulation: {
      const int64_t devices = parse_tpu_accelerator_type(spec.host_type).devices_per_host;
      if (volt_tpu_emulation_init(&table, static_cast<int>(devices), error, sizeof error) != 0) {
        throw NotSupportedError(std::string("the TPU emulation (TorchScript lazy backend) failed to start: ") + error);
      }
      break;
    }
    case TpuRuntimeSpec::Kind::kLibrary: {
      // RTLD_GLOBAL: the backend registers LibTorch objects other code must see.
      void* handle = ::dlopen(spec.library.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle == nullptr) {
        const char* why = ::dlerror();
        throw ConfigError(
            "VOLT_TPU_RUNTIME_LIBRARY=" + spec.library + " could not be loaded: " + (why ? why : "unknown reason") +
            ". Give the path of a shared library that exports " + VOLT_TPU_RUNTIME_INIT_SYMBOL + " (docs/tpu.md).");
      }
      auto init = reinterpret_cast<VoltTpuRuntimeInitFn>(::dlsym(handle, VOLT_TPU_RUNTIME_INIT_SYMBOL));
      if (init == nullptr) {
        throw ConfigError("VOLT_TPU_RUNTIME_LIBRARY=" + spec.library + " has no symbol " +
                          VOLT_TPU_RUNTIME_INIT_SYMBOL +
                          ". A TPU runtime library exports it as extern \"C\" with "
                          "the signature in volt/accelerators/tpu_runtime_abi.h.");
      }
      if (init(&table, error, sizeof error) != 0) {
        throw ConfigError("TPU runtime library '" + spec.library + "' failed to initialise: " + error);
      }
      if (table.abi_version != 1 && table.abi_version != VOLT_TPU_RUNTIME_ABI_VERSION) {
        throw ConfigError("TPU runtime library '" + spec.library + "' implements entry-point version " +
                          std::to_string(table.abi_version) + "; this Volt speaks versions 1 and " +
                          std::to_string(VOLT_TPU_RUNTIME_ABI_VERSION) + ". Rebuild the library against this Volt.");
      }
      break;  // the library stays loaded for the life of the process, as its backend must
    }
  }
  auto runtime = std::make_shared<TpuRuntime>(spec, table);
  opened[key] = runtime;
  return runtime;
}

std::string TpuRuntime::describe() const {
  const std::string devices =
      std::to_string(device_count_) + " " + c10::DeviceTypeName(device_type_, true) + " device(s)";
  if (spec_.kind == TpuRuntimeSpec::Kind::kEmulation) {
    return "emulated " + spec_.host_type + " host: " + name_ + ", " + devices + " (VOLT_TPU_EMULATION=lazy)";
  }
  return name_ + " from " + spec_.library + ", " + devices +
         (has_collective() ? ", its own all-reduce" : ", gradients averaged on host copies") +
         " (VOLT_TPU_RUNTIME_LIBRARY)";
}

void TpuRuntime::mark_step(const c10::Device& device) const {
  char error[1024] = {0};
  if (mark_step_(device.has_index() ? device.index() : 0, error, sizeof error) != 0) {
    throw NotSupportedError("the TPU runtime " + name_ + " failed at a step boundary on " + device.str() + ": " +
                            error);
  }
}

void TpuRuntime::all_reduce_mean(const c10::Device& device, std::vector<at::Tensor>& tensors,
                                 int64_t world_size) const {
  if (all_reduce_mean_ == nullptr) {
    throw Error("TpuRuntime::all_reduce_mean: the TPU runtime " + name_ + " has no collective of its own.");
  }
  char error[1024] = {0};
  if (all_reduce_mean_(device.has_index() ? device.index() : 0, tensors.data(), tensors.size(),
                       static_cast<int>(world_size), error, sizeof error) != 0) {
    throw DistributedError("the TPU runtime " + name_ + " failed to average " + std::to_string(tensors.size()) +
                           " gradient tensor(s) over " + std::to_string(world_size) + " processes on " +
                           device.str() + ": " + error);
  }
}

int64_t TpuRuntime::uncached_compiles() {
  return counter("UncachedCompile");
}

int64_t TpuRuntime::cached_compiles() {
  return counter("CachedCompile");
}

}  // namespace volt::accelerators
