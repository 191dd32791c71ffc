#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "volt/core/environ.h"

namespace volt {

/// What a TPU accelerator type ("v2-8", "v3-32", "v4-16", "v5litepod-8", "v5p-8",
/// "v6e-4") says about one host.
struct TpuTopology {
  std::string accelerator_type;  ///< as given
  std::string generation;        ///< "v2", "v3", "v4", "v5e", "v5p", "v6e"
  /// Devices per host that one process each drives: v2/v3 hosts have 8 TensorCores;
  /// v4/v5p hosts 4 chips; v5e/v6e hosts up to 8 chips (4 per host in pods over 8).
  int64_t devices_per_host = 0;
  /// Hosts in the slice implied by the type (v3-32: 4 hosts).
  int64_t num_hosts = 1;
};

/// Parses an accelerator type. Throws ConfigError naming the value and the known forms.
TpuTopology parse_tpu_accelerator_type(const std::string& accelerator_type);

/// The TPU platform this process runs on, from its variables alone.
struct TpuHost {
  bool present = false;
  /// "colab", "kaggle", "gce" (a Cloud TPU VM), or "unknown".
  std::string platform = "unknown";
  TpuTopology topology;
  /// This host's index (TPU_WORKER_ID) and all hosts (TPU_WORKER_HOSTNAMES).
  int64_t worker_id = 0;
  std::vector<std::string> worker_hostnames;
  /// Which variables or files said so, for `volt plan`.
  std::string evidence;
};

/// Reads TPU_ACCELERATOR_TYPE, TPU_NAME, TPU_WORKER_ID, TPU_WORKER_HOSTNAMES,
/// COLAB_TPU_ADDR, PJRT_DEVICE, KAGGLE_*, COLAB_* from `env`; VOLT_TPU_DEVICES_PER_HOST
/// overrides the devices per host. `device_files` says whether /dev/accel* or /dev/vfio
/// devices or libtpu were found (the caller probes the file system).
TpuHost describe_tpu_host(const Environ& env, bool device_files, const std::string& file_evidence = "");

}  // namespace volt
