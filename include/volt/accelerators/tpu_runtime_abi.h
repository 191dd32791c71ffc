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

/** The ABI version this header describes. Volt also accepts a library that reports 1
 *  (the same table without `all_reduce_mean`) and refuses any other. */
#define VOLT_TPU_RUNTIME_ABI_VERSION 2

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
  /** Optional (version 2; leave NULL if the runtime has none): the runtime's own collective
   *  for strategy "xla". Replaces each of the `count` tensors at `tensors` (an array of
   *  at::Tensor, C++ objects of the LibTorch both sides are built with, on device
   *  `device_index`) by its mean over the `world_size` processes of the job, in place. The
   *  job's layout is in the process environment (RANK, WORLD_SIZE, MASTER_ADDR,
   *  MASTER_PORT; Volt's own c10d store uses MASTER_PORT). Volt calls it in every process
   *  before each optimizer step, after mark_step, with the gradients in the same order.
   *  Without it, Volt averages them on host copies through c10d Gloo. Returns 0, or
   *  nonzero with a message in `error`. */
  int (*all_reduce_mean)(int device_index, void* tensors, size_t count, int world_size, char* error,
                         size_t error_size);
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
