// A TPU runtime library for tests: it registers LibTorch's TorchScript lazy backend
// through Volt's documented entry point (volt/accelerators/tpu_runtime_abi.h), so the
// run-time loading path (dlopen, dlsym, init, mark_step) runs for real on any machine.
// It also brings a collective of its own (all_reduce_mean), as a TPU runtime would: a
// stand-in for the chips' all-reduce, built on a c10d TCPStore of its own at
// MASTER_ADDR:MASTER_PORT+1, summing the ranks' values in rank order.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ops/cat.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <torch/csrc/lazy/backend/backend_interface.h>
#include <torch/csrc/lazy/core/lazy_graph_executor.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>

#include "volt/accelerators/tpu_runtime_abi.h"
#include "volt/core/compat.h"

namespace {

void write_error(char* error, size_t error_size, const std::string& message) {
  std::strncpy(error, message.c_str(), error_size - 1);
  error[error_size - 1] = '\0';
}

int g_mark_steps = 0;

int mark_step(int device_index, char* error, size_t error_size) {
  try {
    const auto device = torch::lazy::atenDeviceToBackendDevice(c10::Device(c10::kLazy, device_index));
    torch::lazy::LazyGraphExecutor::Get()->SyncLiveTensorsGraph(&device, {}, /*wait=*/true);
    ++g_mark_steps;
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

int g_collectives = 0;
c10::intrusive_ptr<c10d::TCPStore> g_store;

int env_int(const char* key, int fallback) {
  const char* v = std::getenv(key);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

int all_reduce_mean(int /*device_index*/, void* tensors, size_t count, int world_size, char* error,
                    size_t error_size) {
  try {
    auto* ts = static_cast<at::Tensor*>(tensors);
    const int rank = env_int("RANK", 0);
    if (!g_store) {
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(env_int("MASTER_PORT", 29500) + 1);
      opts.isServer = rank == 0;
      opts.numWorkers = static_cast<std::size_t>(world_size);
      opts.waitWorkers = false;
      opts.timeout = std::chrono::seconds(60);
#if VOLT_TORCH_VERSION_AT_LEAST(2, 1)
      opts.useLibUV = false;
#endif
      const char* addr = std::getenv("MASTER_ADDR");
      g_store = c10::make_intrusive<c10d::TCPStore>(addr != nullptr ? addr : "127.0.0.1", opts);
    }
    std::vector<at::Tensor> host;
    for (size_t i = 0; i < count; ++i) host.push_back(ts[i].detach().to(c10::kCPU, at::kFloat).reshape({-1}));
    const at::Tensor flat = at::cat(host).contiguous();
    const auto n = static_cast<size_t>(flat.numel());
    const std::string prefix = "all_reduce/" + std::to_string(g_collectives) + "/";
    const auto* bytes = static_cast<const uint8_t*>(flat.data_ptr());
    g_store->set(prefix + std::to_string(rank), std::vector<uint8_t>(bytes, bytes + n * sizeof(float)));
    at::Tensor sum = at::zeros({static_cast<int64_t>(n)}, at::kFloat);
    for (int r = 0; r < world_size; ++r) {
      std::vector<uint8_t> theirs = g_store->get(prefix + std::to_string(r));
      if (theirs.size() != n * sizeof(float)) {
        write_error(error, error_size, "rank " + std::to_string(r) + " sent " + std::to_string(theirs.size()) +
                                           " bytes, this rank " + std::to_string(n * sizeof(float)));
        return 1;
      }
      sum.add_(at::from_blob(theirs.data(), {static_cast<int64_t>(n)}, at::kFloat));
    }
    sum.div_(world_size);
    int64_t offset = 0;
    for (size_t i = 0; i < count; ++i) {
      const int64_t k = ts[i].numel();
      ts[i].detach().copy_(sum.narrow(0, offset, k).view(ts[i].sizes()).to(ts[i].device()));
      offset += k;
    }
    if (g_collectives == 0) {
      std::fprintf(stderr, "volt-test-runtime: rank %d averages gradients with the runtime's own collective\n", rank);
    }
    ++g_collectives;
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int volt_tpu_runtime_init(VoltTpuRuntime* runtime, char* error,
                                                                 size_t error_size) {
  if (runtime->abi_version != VOLT_TPU_RUNTIME_ABI_VERSION) {
    write_error(error, error_size, "unexpected ABI version");
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
  runtime->all_reduce_mean = &all_reduce_mean;
  return 0;
}

/// How often Volt called mark_step through the table (for the tests).
__attribute__((visibility("default"))) int volt_test_runtime_mark_steps() {
  return g_mark_steps;
}
}
