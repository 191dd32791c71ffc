// A TPU runtime library for tests: it registers LibTorch's TorchScript lazy backend
// through Volt's documented entry point (volt/accelerators/tpu_runtime_abi.h), so the
// run-time loading path (dlopen, dlsym, init, mark_step) runs for real on any machine.
#include <cstring>
#include <mutex>

#include <torch/csrc/lazy/backend/backend_interface.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>

#include "volt/accelerators/tpu_runtime_abi.h"

namespace {

int g_mark_steps = 0;

int mark_step(int device_index, char* error, size_t error_size) {
  try {
    const auto device = torch::lazy::atenDeviceToBackendDevice(c10::Device(c10::kLazy, device_index));
    torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&device, {}, /*wait=*/true);
    ++g_mark_steps;
    return 0;
  } catch (const std::exception& e) {
    std::strncpy(error, e.what(), error_size - 1);
    error[error_size - 1] = '\0';
    return 1;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int volt_tpu_runtime_init(VoltTpuRuntime* runtime, char* error,
                                                                 size_t error_size) {
  if (runtime->abi_version != VOLT_TPU_RUNTIME_ABI_VERSION) {
    std::strncpy(error, "unexpected ABI version", error_size - 1);
    return 1;
  }
  static std::once_flag once;
  // A process holds one lazy backend; Volt's own emulation may have registered it (the
  // same TorchScript backend) earlier in this test process.
  std::call_once(once, [] {
    if (!torch::lazy::hasBackend()) torch::lazy::InitTorchScriptBackend();
  });
  runtime->name = "volt-test-runtime (TorchScript lazy)";
  runtime->device_type = "lazy";
  runtime->device_count = 8;
  runtime->mark_step = &mark_step;
  return 0;
}

/// How often Volt called mark_step through the table (for the tests).
__attribute__((visibility("default"))) int volt_test_runtime_mark_steps() {
  return g_mark_steps;
}
}
