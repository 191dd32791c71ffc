#pragma once
/// Every public header of volt/accelerators/.
#include "volt/accelerators/accelerator.h"
#include "volt/accelerators/accelerator_registry.h"
#include "volt/accelerators/cpu_accelerator.h"
#include "volt/accelerators/cuda_accelerator.h"
#include "volt/accelerators/devices.h"
#include "volt/accelerators/hardware_probe.h"
#include "volt/accelerators/tpu_accelerator.h"
#include "volt/accelerators/tpu_runtime.h"
#include "volt/accelerators/tpu_runtime_abi.h"
