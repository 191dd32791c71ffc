#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "volt/accelerators/tpu_runtime_abi.h"
#include "volt/core/environ.h"

namespace volt::accelerators {

/// Which TPU device runtime a process asked for, read from two documented settings:
/// - VOLT_TPU_RUNTIME_LIBRARY=/path/lib.so: a lazy-tensor backend loaded at run time
///   through the C entry point of tpu_runtime_abi.h (what a TPU host uses);
/// - VOLT_TPU_EMULATION=lazy: LibTorch's TorchScript lazy backend on the CPU stands in for
///   a TPU host of type VOLT_TPU_EMULATION_HOST (default v3-8: 8 devices).
/// The library wins when both are set.
struct TpuRuntimeSpec {
  enum class Kind { kNone, kLibrary, kEmulation };
  Kind kind = Kind::kNone;
  std::string library;             ///< kLibrary: the path as given
  std::string host_type = "v3-8";  ///< kEmulation: the accelerator type stood in for

  /// "none", "library:/path" or "emulation:lazy:v3-8" (what a Plan stores).
  std::string to_string() const;
  /// The inverse of to_string; ConfigError otherwise.
  static TpuRuntimeSpec parse(const std::string& text);
  /// From the settings above. ConfigError for a VOLT_TPU_EMULATION other than "lazy", an
  /// unknown host type, or an empty library path.
  static TpuRuntimeSpec from_environ(const Environ& env);
  /// Which settings were read and what they held, for error messages.
  static std::string looked_for(const Environ& env);
};

/// A loaded TPU device runtime: the lazy-tensor backend behind accelerator="tpu". One per
/// process and spec (opening the same spec twice returns the same runtime).
class TpuRuntime {
 public:
  /// Loads the library (dlopen + volt_tpu_runtime_init) or starts the emulation. Throws
  /// NotSupportedError for kNone, ConfigError for a library that cannot be opened, lacks
  /// the entry point, reports another ABI version or fails to initialise.
  static std::shared_ptr<TpuRuntime> open(const TpuRuntimeSpec& spec);

  const TpuRuntimeSpec& spec() const { return spec_; }
  /// The backend's own name ("torchscript-lazy (emulation)", what a library reports).
  const std::string& name() const { return name_; }
  /// Where its tensors live: kLazy (emulation, LTC backends) or kXLA.
  c10::DeviceType device_type() const { return device_type_; }
  /// Devices this process may address.
  int64_t device_count() const { return device_count_; }
  /// One line for `volt plan`: what runs, from where.
  std::string describe() const;
  /// The step boundary on `device`: compiles (or reuses) and runs the recorded graph.
  /// Throws NotSupportedError with the backend's message when it fails.
  void mark_step(const c10::Device& device) const;
  /// Whether the runtime brings its own collective (VoltTpuRuntime::all_reduce_mean).
  bool has_collective() const { return all_reduce_mean_ != nullptr; }
  /// The runtime's collective: each tensor (on `device`) replaced by its mean over the
  /// `world_size` processes. Throws DistributedError with the runtime's message; a
  /// runtime without one is a logic error (check has_collective()).
  void all_reduce_mean(const c10::Device& device, std::vector<at::Tensor>& tensors, int64_t world_size) const;

  /// Graphs compiled so far by LibTorch's lazy-tensor executor in this process (its
  /// "UncachedCompile" counter) and graphs reused from its cache ("CachedCompile"). A
  /// count that grows with every step means the graph grows: a missing mark_step.
  static int64_t uncached_compiles();
  static int64_t cached_compiles();

  TpuRuntime(TpuRuntimeSpec spec, const VoltTpuRuntime& table);

 private:
  TpuRuntimeSpec spec_;
  std::string name_;
  c10::DeviceType device_type_;
  int64_t device_count_;
  int (*mark_step_)(int, char*, size_t);
  int (*all_reduce_mean_)(int, void*, size_t, int, char*, size_t);
};

/// The emulation's entry point, with the same signature a library exports: registers the
/// TorchScript lazy backend and reports `device_count` lazy devices. Used by
/// TpuRuntime::open for kEmulation; public so that tests can compare the two paths.
int volt_tpu_emulation_init(VoltTpuRuntime* runtime, int device_count, char* error, size_t error_size);

}  // namespace volt::accelerators
