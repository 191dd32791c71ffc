/* The one entry point a TPU device runtime library exports for Volt (plain C, stable).
 *
 * Volt loads the library named by VOLT_TPU_RUNTIME_LIBRARY with dlopen() when a Trainer
 * is built for accelerator="tpu", looks up `volt_tpu_runtime_init` and calls it once per
 * process. The library registers a LibTorch lazy-tensor backend (on a TPU host: one that
 * hands the recorded graphs to PJRT/libtpu; in Volt's tests: LibTorch's TorchScript lazy
 * backend) and fills the table below. After that, Volt creates parameters and batches on
 * `device_type:i` and calls `mark_step` at every step boundary.
 *
 * The library must be built against the same LibTorch as Volt (the lazy-tensor classes
 * are C++); only this table crosses the boundary. See docs/tpu.md. */
#ifndef VOLT_ACCELERATORS_TPU_RUNTIME_ABI_H_
#define VOLT_ACCELERATORS_TPU_RUNTIME_ABI_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI version this header describes; Volt refuses a library that reports another. */
#define VOLT_TPU_RUNTIME_ABI_VERSION 1

/** What the library reports. Strings must stay valid until the process exits. */
typedef struct VoltTpuRuntime {
  /** Set by Volt before the call to VOLT_TPU_RUNTIME_ABI_VERSION; the library sets it to
   *  the version it implements. */
  int abi_version;
  /** A short name for `volt plan` and logs, e.g. "pjrt-tpu". */
  const char* name;
  /** The c10 device type its tensors live on: "xla" or "lazy". */
  const char* device_type;
  /** Devices this process may address (device indices 0 .. device_count - 1). */
  int device_count;
  /** The step boundary: compile (or fetch from the cache) and run everything recorded on
   *  device `device_index`, and wait for it. Returns 0, or nonzero with a message written
   *  into `error` (at most `error_size` bytes, NUL-terminated). */
  int (*mark_step)(int device_index, char* error, size_t error_size);
} VoltTpuRuntime;

/** The entry point. Registers the backend (idempotent: Volt calls it once per process),
 *  fills `runtime` and returns 0; or returns nonzero with a message in `error`. */
typedef int (*VoltTpuRuntimeInitFn)(VoltTpuRuntime* runtime, char* error, size_t error_size);

/** The symbol name Volt looks up. */
#define VOLT_TPU_RUNTIME_INIT_SYMBOL "volt_tpu_runtime_init"

#ifdef __cplusplus
}
#endif

#endif /* VOLT_ACCELERATORS_TPU_RUNTIME_ABI_H_ */
