#include "volt/core/tpu_topology.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include "volt/core/error.h"
#include "volt/core/numbers.h"

namespace volt {

TpuTopology parse_tpu_accelerator_type(const std::string& accelerator_type) {
  static const std::regex kForm(R"(^v(\d+)(litepod|e|p)?-(\d+)$)");
  std::smatch m;
  if (!std::regex_match(accelerator_type, m, kForm)) {
    throw ConfigError("TPU accelerator type '" + accelerator_type +
                      "' is not understood. Known forms: v2-8, v3-32, v4-8, v5p-8, v5litepod-8 (or v5e-8), v6e-4.");
  }
  // Digits only, but maybe more than 64 bits hold (the value comes from the environment or --assume).
  const auto version_number = numbers::parse_int(m[1].str(), 0, 1000);
  const auto cores = numbers::parse_int(m[3].str(), 0, 1000000);
  if (!version_number || !cores) {
    throw ConfigError("TPU accelerator type '" + accelerator_type + "' has the " +
                      (version_number ? "size " + m[3].str() + ", which " + cores.problem
                                      : "generation " + m[1].str() + ", which " + version_number.problem) +
                      ". Known forms: v2-8, v3-32, v4-8, v5p-8, v5litepod-8 (or v5e-8), v6e-4.");
  }
  const int version = static_cast<int>(*version_number.value);
  const std::string variant = m[2];
  const int64_t n = *cores.value;
  TpuTopology t;
  t.accelerator_type = accelerator_type;
  if (n < 1) throw ConfigError("TPU accelerator type '" + accelerator_type + "' has no cores.");
  if ((version == 2 || version == 3) && variant.empty()) {
    t.generation = "v" + std::to_string(version);
    t.devices_per_host = std::min<int64_t>(n, 8);  // n counts TensorCores, 8 per host
    t.num_hosts = std::max<int64_t>(1, n / 8);
  } else if ((version == 4 && variant.empty()) || (version == 5 && variant == "p")) {
    t.generation = version == 4 ? "v4" : "v5p";
    const int64_t chips = std::max<int64_t>(1, n / 2);  // n counts TensorCores, 2 per chip
    t.devices_per_host = std::min<int64_t>(chips, 4);
    t.num_hosts = std::max<int64_t>(1, chips / 4);
  } else if ((version == 5 && (variant == "litepod" || variant == "e")) || (version == 6 && variant == "e")) {
    t.generation = version == 5 ? "v5e" : "v6e";
    t.devices_per_host = n <= 8 ? n : 4;  // n counts chips
    t.num_hosts = n <= 8 ? 1 : n / 4;
  } else {
    throw ConfigError("TPU accelerator type '" + accelerator_type +
                      "' names a TPU generation Volt does not know. Known: v2, v3, v4, v5p, v5e (v5litepod), v6e. "
                      "Set VOLT_TPU_DEVICES_PER_HOST to say how many devices each host has.");
  }
  return t;
}

TpuHost describe_tpu_host(const Environ& env, bool device_files, const std::string& file_evidence) {
  TpuHost host;
  std::vector<std::string> evidence;
  for (const char* key : {"TPU_ACCELERATOR_TYPE", "TPU_NAME", "COLAB_TPU_ADDR", "TPU_WORKER_ID"}) {
    if (env.has(key)) evidence.push_back(std::string(key) + "=" + env.get_or(key, ""));
  }
  if (env.get_or("PJRT_DEVICE", "") == "TPU") evidence.push_back("PJRT_DEVICE=TPU");
  if (device_files) evidence.push_back(file_evidence.empty() ? "TPU device files" : file_evidence);
  host.present = !evidence.empty();
  if (!host.present) return host;

  if (env.has("COLAB_TPU_ADDR") || env.has("COLAB_RELEASE_TAG") || env.has("COLAB_GPU")) {
    host.platform = "colab";
  } else if (env.has("KAGGLE_KERNEL_RUN_TYPE") || env.has("KAGGLE_URL_BASE")) {
    host.platform = "kaggle";
  } else if (env.has("TPU_WORKER_ID") || env.has("TPU_WORKER_HOSTNAMES") || env.has("TPU_ACCELERATOR_TYPE")) {
    host.platform = "gce";
  }
  std::string type = env.get_or("TPU_ACCELERATOR_TYPE", "");
  if (type.empty() && host.platform == "colab") type = "v2-8";   // Colab's TPU runtime is a v2-8
  if (type.empty() && host.platform == "kaggle") type = "v3-8";  // Kaggle's is a v3-8
  if (!type.empty()) {
    host.topology = parse_tpu_accelerator_type(type);
  } else {
    host.topology.accelerator_type = "unknown";
    host.topology.generation = "unknown";
    host.topology.devices_per_host = 8;
  }
  if (auto per_host = env.get_int("VOLT_TPU_DEVICES_PER_HOST")) {
    if (*per_host < 1) throw ConfigError("VOLT_TPU_DEVICES_PER_HOST=0: a TPU host has at least one device.");
    host.topology.devices_per_host = *per_host;
  }
  host.worker_id = env.get_int_or("TPU_WORKER_ID", 0);
  if (auto names = env.get("TPU_WORKER_HOSTNAMES"); names && !names->empty()) {
    std::stringstream ss(*names);
    std::string name;
    while (std::getline(ss, name, ',')) {
      if (!name.empty()) host.worker_hostnames.push_back(name);
    }
  }
  // One host: this one, without a name lookup (a minimal system may have no /etc/hosts).
  if (host.worker_hostnames.empty()) host.worker_hostnames.push_back("127.0.0.1");
  if (host.worker_id >= static_cast<int64_t>(host.worker_hostnames.size())) {
    throw ConfigError("TPU_WORKER_ID=" + std::to_string(host.worker_id) + " but TPU_WORKER_HOSTNAMES lists " +
                      std::to_string(host.worker_hostnames.size()) + " host(s).");
  }
  std::string joined;
  for (const auto& e : evidence) joined += (joined.empty() ? "" : ", ") + e;
  host.evidence = joined;
  return host;
}

}  // namespace volt
