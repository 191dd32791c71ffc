/* A stand-in for the NVIDIA driver's NVML library (libnvidia-ml.so.1), with the three
   entry points DeviceStatsMonitor calls: device N reports gpu = 10 * N + 7 percent and
   memory = N + 2 percent; there are 4 devices. */
extern "C" {
typedef struct {
  unsigned gpu;
  unsigned memory;
} fake_utilization;

static unsigned devices[4] = {0, 1, 2, 3};

int nvmlInit_v2(void) { return 0; }

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= 4) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = &devices[index];
  return 0;
}

int nvmlDeviceGetUtilizationRates(void* device, fake_utilization* u) {
  const unsigned n = *static_cast<const unsigned*>(device);
  u->gpu = 10 * n + 7;
  u->memory = n + 2;
  return 0;
}

}  // extern "C"
